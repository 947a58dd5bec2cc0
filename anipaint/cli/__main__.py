"""``python -m anipaint.cli``: the ``anipaint`` command."""

import sys

from anipaint.cli.main import main

sys.exit(main())
