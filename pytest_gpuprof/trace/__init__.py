"""Stage 2, trace: read what a capture left behind into one normalized trace.

``model`` is that trace (integer-nanosecond pandas tables with fixed columns);
``kineto`` reads torch.profiler's Chrome-trace JSON, ``nsys_sqlite`` Nsight
Systems' SQLite export.  Every later stage reads ``model.Trace`` and never a file.

May import: the standard library, numpy, pandas, ``pytest_gpuprof.errors`` and
``capture.ranges`` (the names a capture gives its ranges and marks).
"""
