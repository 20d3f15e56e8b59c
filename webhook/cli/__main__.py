"""``python -m webhook.cli``: the ``carbonshift`` command."""

import sys

from webhook.cli import main

sys.exit(main())
