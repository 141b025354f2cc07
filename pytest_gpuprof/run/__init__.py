"""Stage 6, run: one pytest run under ``--gpuprof``, from the tests to the files.

``session`` is the plugin object that profiles, judges and reports each test;
``backends`` says where a test's trace comes from (torch.profiler, kept traces,
the session re-run under nsys); ``nsys_backend`` is that re-run's outer side;
``bench`` hands pytest-benchmark's fixture over GPU-aware.

May import: pytest and every stage before it.
"""
