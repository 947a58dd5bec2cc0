"""Shared fixtures: one model store per test session, prepared from the real sources in ../shared/models.

The environment is set before anipaint reads its settings, so every test, and every server subprocess a test
starts, uses the same session store and never the user's ~/.cache/anipaint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from PIL import Image

from anipaint.settings import settings_from_env

REPO = Path(__file__).resolve().parent.parent
SOURCES = Path(os.environ.get("ANIPAINT_SOURCES") or REPO.parent / "shared" / "models").resolve()

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="anipaint-test-home-"))
os.environ["ANIPAINT_HOME"] = str(_SESSION_HOME)
os.environ["ANIPAINT_SOURCES"] = str(SOURCES)
# Test servers convert the other styles in the background but build no engines (minutes of CPU each);
# tests/test_first_run.py checks the full background preparation.
os.environ.setdefault("ANIPAINT_BACKGROUND", "convert")

SAMPLES = settings_from_env().samples_dir
GROUP_PHOTO = SAMPLES / "group_pakutaso.jpg"


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - pytest hook signature
    shutil.rmtree(_SESSION_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def sources() -> Path:
    if not SOURCES.is_dir():
        pytest.skip(f"model sources not found at {SOURCES}")
    return SOURCES


@pytest.fixture(scope="session")
def session_home() -> Path:
    return _SESSION_HOME


@pytest.fixture(scope="session")
def prepared_store(sources: Path) -> Path:
    """The session store with every available style converted once."""
    from anipaint import store
    from anipaint.settings import reload_settings

    settings = reload_settings()
    results = store.prepare(None, settings)
    failed = {k: v for k, v in results.items() if v.startswith("failed")}
    assert not failed, failed
    return settings.models_dir


@pytest.fixture(scope="session")
def engine_builds(prepared_store: Path):
    """``build(style_id)``: the style's fast engines built and measured by ``auto`` in the session store, once per
    run whoever asks first; returns auto's record. Tests that start from an empty store copy these builds in
    (:func:`seed_builds`), so that they check measuring and the switch onto a built engine, not the compile."""
    from anipaint import store
    from anipaint.engine import prepare
    from anipaint.registry import get_style
    from anipaint.settings import reload_settings

    records: dict[str, dict] = {}

    def build(style_id: str) -> dict:
        if style_id not in records:
            style = get_style(style_id)
            settings = reload_settings()
            records[style_id] = prepare(style, store.artefact_path(style, settings), settings, "auto")
        return records[style_id]

    return build


def seed_builds(style_id: str, home: Path) -> list[Path]:
    """Copy the session store's builds of a style (made by :func:`engine_builds`), not auto's record, into the
    store at ``home``; returns the copies. Builds are keyed by the converted weights, which convert byte for
    byte the same in any store, so the empty store's preparation finds them and only measures."""
    from anipaint.engine import backends
    from anipaint.registry import get_style
    from anipaint.settings import Settings, reload_settings

    style = get_style(style_id)
    built = sorted(p for p in backends.cache_dir(style, reload_settings()).iterdir() if p.suffix in (".pt2", ".onnx"))
    assert built, f"{style_id} has no builds in the session store: ask engine_builds({style_id!r}) first"
    target = backends.cache_dir(style, Settings(home=home, sources=SOURCES))
    target.mkdir(parents=True, exist_ok=True)
    for path in built:
        shutil.copy2(path, target / path.name)
    return [target / p.name for p in built]


@pytest.fixture(scope="session")
def group_photo() -> Image.Image:
    if not GROUP_PHOTO.is_file():
        pytest.skip("sample photo missing")
    return Image.open(GROUP_PHOTO).convert("RGB")


@pytest.fixture(scope="session")
def astronaut() -> Image.Image:
    data = pytest.importorskip("skimage.data")
    return Image.fromarray(data.astronaut())
