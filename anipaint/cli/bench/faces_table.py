"""What faces cost: a photo painted with the face pass, portrait mode and a background style, each against the
plain picture.

Each round paints the photo once per mode in turns (plain, faces, portrait, plain, ...) in one process with warm
models; a mode's figure is the median over rounds of (mode ÷ the plain paint of the same round), since on a
shared machine the absolute seconds drift and the ratio much less. The face detector's cache is emptied before
every paint, so detection is paid each time as for a new photo.
"""

from __future__ import annotations

import statistics
from typing import Any

from anipaint.cli.bench.measure import Row
from anipaint.engine.runtime import timing
from anipaint.settings import Settings

MODES: dict[str, dict[str, Any]] = {
    "plain": {"faces": False},
    "faces": {"faces": True},
    "portrait": {"faces": False, "portrait": True},
    "portrait+background": {"faces": False, "portrait": True, "background": "v3-shinkai"},
}
# What each mode needs besides the face detector, as style ids.
NEEDS = {"portrait": ("v3-jp-face",), "portrait+background": ("v3-jp-face", "v3-shinkai")}


def measure(settings: Settings, photo: bytes, style_id: str, modes: list[str], side: int,
            rounds: int) -> tuple[dict[str, list[float]], str]:
    """Seconds per round for each mode (``plain`` always included), and the backend the style painted on."""
    from anipaint.faces import get_face_detector
    from anipaint.models import helpers
    from anipaint.painter import get_painter

    painter = get_painter(style_id, settings).warm()
    detector = get_face_detector(settings, helpers.install_face_detector(settings))

    def run(mode: str):
        def paint() -> None:
            detector.clear_cache()  # a new photo every time: detection is part of the cost
            painter.paint(photo, max_side=side, **MODES[mode])

        return paint

    modes = ["plain", *(m for m in modes if m != "plain")]
    for mode in modes:  # warm-up: models loaded, engines built
        run(mode)()
    per_round: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        got = timing.alternate({mode: run(mode) for mode in modes}, rounds=1)
        for mode in modes:
            per_round[mode].append(got[mode].seconds)
    return per_round, painter.engine.backend_name


def ratios(per_round: dict[str, list[float]], mode: str) -> list[float]:
    """Each round's ``mode`` time ÷ the plain paint of the same round."""
    return [t / p for t, p in zip(per_round[mode], per_round["plain"], strict=True)]


def faces_rows(settings: Settings, photo: bytes, rounds: int) -> list[Row]:
    """The default style on the group photo at 512 px: plain, faces on, portrait (where its models are here)."""
    from anipaint.engine import build_backends
    from anipaint.models import helpers, store
    from anipaint.models.registry import get_style

    if helpers.install_face_detector(settings) is None:
        return [Row("faces and portrait", float("nan"), note="no face detector here")]
    portrait = all(store.convert([s], settings).get(s) == "ok" for s in NEEDS["portrait"])
    if portrait:  # the face model on the engine auto picks, as a prepared store serves it (not its eager network)
        for style_id in NEEDS["portrait"]:
            style = get_style(style_id)
            build_backends(style, store.artefact_path(style, settings), settings, "auto")
    modes = ["faces", "portrait"] if portrait else ["faces"]
    per_round, backend = measure(settings, photo, settings.default_style, modes, 512, max(rounds, 3))
    name = f"{settings.default_style} ({backend})"
    plain = statistics.median(per_round["plain"])
    rows = [Row(f"{name}, group photo, faces off", plain, 1.0)]
    for mode, label in (("faces", "faces on"), ("portrait", "portrait (v3-jp-face + person segmentation)")):
        if mode not in per_round:
            rows.append(Row(f"{name}, {label}", float("nan"), note="its models are not available here"))
            continue
        cost = statistics.median(ratios(per_round, mode))
        rows.append(Row(f"{name}, {label}", statistics.median(per_round[mode]), 1 / cost,
                        note=f"costs {cost:.2f}x the plain picture (median of per-round ratios)"))
    return rows
