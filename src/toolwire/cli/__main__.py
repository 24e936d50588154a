"""``python -m toolwire.cli``: the same command as ``toolwire``."""

import sys

from toolwire.cli import main

sys.exit(main())
