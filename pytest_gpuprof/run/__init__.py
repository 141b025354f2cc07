"""Stage 6, run: one pytest run under ``--gpuprof``, from the tests to the files.

``role`` reads, in one place, which process this is (a side of an A/B comparison, a
confirmation re-run, a recording's later process, a distributed test's rank, the session
inside nsys or ncu); ``settings`` holds the options resolved with it.  One plugin object
per role, registered by ``plugin.py``: ``session`` profiles each test and has it judged
(``compare.judge``), ``torchrun_session`` is a torchrun rank's, ``xdist_relay`` a pytest-xdist
worker's and controller's, ``base_revision`` the head's of an A/B comparison; ``steps`` and
``base_revision`` are the steps after judging (``hookspec``), ``bench`` hands pytest-benchmark's
fixture over GPU-aware.  ``outcomes`` keeps what the run found and writes it at the end;
``backends`` says where a test's trace comes from (torch.profiler, kept traces, the session
re-run under nsys, whose outer side is ``nsys_backend``); ``fresh`` starts every child pytest.

May import: pytest and every stage before it.
"""
