"""Stage 1, capture: run a test's steps under a profiler and leave a trace behind.

``profiler`` drives the steps (torch.profiler, or NVTX ranges alone under Nsight
Systems), ``ranges`` names what the steps leave in the trace, ``nvml`` samples the
GPU's clocks while they run, ``environment`` records what they ran on, when and from
which revision, ``nsys`` runs the Nsight Systems binary.

May import: the standard library, ``pytest_gpuprof.errors``.  torch, nvtx and
pynvml are imported inside the functions that need them, so that a pytest run
without ``--gpuprof`` loads none of them.
"""
