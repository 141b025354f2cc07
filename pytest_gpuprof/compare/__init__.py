"""Stage 4, compare: a measurement against its baseline, under rules, into verdicts.

``rules`` holds the tolerances and thresholds, ``stats`` the statistics of the
noise-aware time gate, ``verdicts`` judges each metric by the rule families
(``exact_rules``, ``threshold_rules``, ``time_rules``) into ``verdict.Verdict`` objects,
reading per-step ``samples``; ``kernels`` diffs two runs kernel by kernel, ``baseline``
reads and writes the baseline files (``entry``: the shapes of their entries, and what one
must hold; ``recording``: the entry a recording stores), ``evaluate`` judges one measurement
and makes the one result object of a test, ``judge`` judges a test from its traces;
``results_doc`` checks a results document read back, where it is read.

May import: the standard library, numpy, pandas, ``options``, ``numbers``,
``files``, ``errors``, and the stages before it (``capture.ranges``, ``trace``,
``metrics``).
"""
