"""Reproduce the README's speed table here: ``python benchmarks/engine_table.py [--quick] [--json out.json]``.

The same as ``anipaint bench`` (see :mod:`anipaint.bench` for what each row and column means).
"""

from __future__ import annotations

import argparse
import sys

from anipaint.bench import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--quick", action="store_true")
    sys.exit(main(parser.parse_args()))
