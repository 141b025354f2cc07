"""Stage 5, report: the results, said to people and to machines.

``document`` builds the one results document; every report renders from it:
``terminal``, ``markdown`` (``--gpuprof-summary``), ``html``, ``junit``
(``--junitxml`` properties) and ``benchmark_json``; ``writers`` writes the files
asked for; ``words`` is how every verdict, change and failure is said.

May import: the standard library, ``numbers``, ``files``, ``errors``, ``options``
and the stages before it (``trace``, ``metrics``, ``compare``).
"""
