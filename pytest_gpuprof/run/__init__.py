"""Stage 6, run: one pytest run under ``--gpuprof``, from the tests to the files.

``role`` reads, in one place, which process this is (a side of an A/B comparison, a
confirmation re-run, a recording's later process, a distributed test's rank, the session
inside nsys or ncu); ``settings`` holds the options resolved with it.  One plugin object
per role, chosen once by ``plugin.py`` and built with what it needs: ``session`` profiles
each test and has it judged (``compare.judge``), ``torchrun_session`` is a torchrun rank's,
``nsys_backend`` holds the two sessions of the nsys backend (outside nsys and inside it),
``xdist_relay`` a pytest-xdist worker's and controller's, ``rank_roles`` where a distributed
test's body runs (spawned from its process, in a rank, under torchrun), ``base_revision``
the head's of an A/B comparison; ``steps`` and ``base_revision`` are the steps after judging
(``hookspec``), ``bench`` hands pytest-benchmark's fixture over GPU-aware.  ``outcomes`` keeps
what the run found and writes it at the end; ``backends`` says where a test's trace comes
from (torch.profiler, kept traces, the session re-run under nsys); ``fresh`` starts every
child pytest.

May import: pytest and every stage before it.
"""
