"""What faces cost: the group photo painted with the face pass (or portrait mode) against the plain picture.

``python benchmarks/faces_cost.py [--style v3-hayao] [--side 512] [--rounds 5] [--modes faces,portrait]``

How it measures: :mod:`anipaint.cli.bench.faces_table` (``anipaint bench --only styles`` has the same rows for the
default style).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from anipaint.cli.bench.faces_table import MODES, measure, ratios
from anipaint.settings import get_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photo", default=None, help="default: the group sample")
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="faces", help=f"comma-separated, from {', '.join(MODES)}")
    args = parser.parse_args(argv)
    settings = get_settings()
    photo = Path(args.photo or settings.samples_dir / "group_pakutaso.jpg").read_bytes()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    per_round, backend = measure(settings, photo, args.style, modes, args.side, args.rounds)
    print(f"{args.style} at {args.side} px, {args.rounds} rounds, backend {backend}")
    for mode in per_round:
        got = ratios(per_round, mode)
        print(f"  {mode:20s} median {statistics.median(per_round[mode]):6.3f} s   "
              f"× plain {statistics.median(got):5.2f}  (rounds: {' '.join(f'{r:.2f}' for r in got)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
