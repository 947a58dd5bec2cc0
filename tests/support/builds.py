"""Engine builds shared between stores, so a test of an empty store does not build them again."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.paths import SOURCES


def seed_builds(style_id: str, home: Path) -> list[Path]:
    """Copy the session store's builds of a style (made by :func:`engine_builds`), not auto's record, into the
    store at ``home``; returns the copies. Builds are keyed by the converted weights, which convert byte for
    byte the same in any store, so the empty store's preparation finds them and only measures."""
    from anipaint.engine import builds
    from anipaint.models.registry import get_style
    from anipaint.settings import Settings, reload_settings

    style = get_style(style_id)
    # the engines, not the browser's model file (device-*.onnx), which the server makes from them
    built = sorted(p for p in builds.cache_dir(style, reload_settings()).iterdir()
                   if p.suffix in (".pt2", ".onnx") and not p.name.startswith("device-"))
    assert built, f"{style_id} has no builds in the session store: ask engine_builds({style_id!r}) first"
    target = builds.cache_dir(style, Settings(home=home, sources=SOURCES))
    target.mkdir(parents=True, exist_ok=True)
    for path in built:
        shutil.copy2(path, target / path.name)
    return [target / p.name for p in built]
