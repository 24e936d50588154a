"""``python -m toolwire``: the same command as ``toolwire``."""

import sys

from toolwire.cli import main

sys.exit(main())
