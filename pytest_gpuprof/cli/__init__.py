"""Stage 7, the command line: ``gpuprof analyze``, ``gpuprof diff`` and ``gpuprof merge``
(``main``), any trace a command is given (``inputs``), two runs compared (``diff``), the
results files of a sharded suite joined as one run (``merge``).

May import: every stage before it, except ``run`` (the commands run no pytest).
"""
