"""The README's speed tables on this machine: ``python benchmarks/engine_table.py [--quick] [--json out.json]``.

The same as ``anipaint bench`` (see :mod:`anipaint.cli.bench` for what each row and column means).
"""

from __future__ import annotations

import sys

from anipaint.cli.bench import main, parser

if __name__ == "__main__":
    sys.exit(main(parser().parse_args()))
