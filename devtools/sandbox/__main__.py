"""``python -m devtools.sandbox``: see :mod:`devtools.sandbox.cli`."""

import sys

from devtools.sandbox.cli import main

sys.exit(main())
