"""Stage 6, run: one pytest run under ``--gpuprof``, from the tests to the files.

``session`` is the plugin object that profiles, judges and reports each test;
``backends`` says where a test's trace comes from (torch.profiler, kept traces,
the session re-run under nsys); ``nsys_backend`` is that re-run's outer side;
``bench`` hands pytest-benchmark's fixture over GPU-aware; ``role`` reads, in one
place, which process this is (a side of an A/B comparison, a confirmation re-run, a
recording's later process, a distributed test's rank, the session inside nsys or ncu).

May import: pytest and every stage before it.
"""
