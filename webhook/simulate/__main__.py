"""``python -m webhook.simulate``: the ``simulate`` command without the main CLI."""

import sys

from webhook.simulate.cli import main

sys.exit(main())
