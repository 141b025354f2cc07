"""Stage 7, the command line: ``gpuprof analyze`` and ``gpuprof diff`` (``main``),
any trace a command is given (``inputs``), two runs compared (``diff``).

May import: every stage before it, except ``run`` (the commands run no pytest).
"""
