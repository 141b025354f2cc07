"""``python -m pytest_gpuprof`` is the ``gpuprof`` command."""

import sys

from .cli import main

sys.exit(main())
