"""``python -m pytest_gpuprof`` is the ``gpuprof`` command."""

import sys

from .cli.main import main

sys.exit(main())
