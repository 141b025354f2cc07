"""Stage 3, metrics: pure, vectorized functions of one normalized trace.

``measure`` computes every metric of docs/metrics.md and the per-step samples over
the steps ``steps`` finds (and the work it attributes to them),
``intervals`` is the interval algebra under them, ``timeline`` keeps a one-step
sample for the reports, ``health`` says whether a run's times can be trusted.

May import: the standard library, numpy, pandas, ``errors``, ``capture.ranges`` and ``trace``.
"""
