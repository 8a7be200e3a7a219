"""``python -m trainfit``: the ``trainfit`` command (``trainfit.cli.main``)."""

import sys

from trainfit.cli.main import main

sys.exit(main())
