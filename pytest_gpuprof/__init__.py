"""pytest-gpuprof: GPU performance as pass/fail tests, gated on JSON baselines."""

__version__ = "0.1.0"
