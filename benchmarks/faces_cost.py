"""What faces cost: the group photo painted with the face pass (or portrait mode) against the plain picture.

``python benchmarks/faces_cost.py [--style v3-hayao] [--side 512] [--rounds 5] [--modes faces,portrait]``

Each round paints the photo once per mode in turns (plain, faces, portrait, plain, ...), in one process with
warm models, and the figure reported is the median over rounds of (mode ÷ the plain paint of the same round):
on a shared machine the absolute seconds drift, the ratio much less. The face detector's cache is emptied
before every paint, so detection is paid each time as for a new photo.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from anipaint import store
from anipaint.engine import timing
from anipaint.faces import get_face_detector
from anipaint.painter import get_painter
from anipaint.settings import get_settings

MODES = {
    "plain": {"faces": False},
    "faces": {"faces": True},
    "portrait": {"faces": False, "portrait": True},
    "portrait+background": {"faces": False, "portrait": True, "background": "v3-shinkai"},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photo", default=None, help="default: the group sample")
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="faces", help=f"comma-separated, from {', '.join(MODES)}")
    args = parser.parse_args(argv)
    settings = get_settings()
    photo = Path(args.photo or Path(settings.sources).parent / "samples" / "group_pakutaso.jpg").read_bytes()
    modes = ["plain", *(m for m in args.modes.split(",") if m and m != "plain")]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    painter = get_painter(args.style, settings).warm()
    detector = get_face_detector(settings, store.prepare_face_detector(settings))

    def run(mode: str):
        def paint() -> None:
            detector.clear_cache()  # a new photo every time: detection is part of the cost
            painter.paint(photo, max_side=args.side, **MODES[mode])

        return paint

    for mode in modes:  # warm-up: models loaded, engines built
        run(mode)()
    per_round = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        got = timing.alternate({mode: run(mode) for mode in modes}, rounds=1)
        for mode in modes:
            per_round[mode].append(got[mode].seconds)
    print(f"{args.style} at {args.side} px, {args.rounds} rounds, backend {painter.engine.backend_name}")
    for mode in modes:
        ratios = [t / p for t, p in zip(per_round[mode], per_round["plain"], strict=True)]
        print(f"  {mode:20s} median {statistics.median(per_round[mode]):6.3f} s   "
              f"× plain {statistics.median(ratios):5.2f}  (rounds: {' '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
