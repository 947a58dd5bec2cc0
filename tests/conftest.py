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
def group_photo() -> Image.Image:
    if not GROUP_PHOTO.is_file():
        pytest.skip("sample photo missing")
    return Image.open(GROUP_PHOTO).convert("RGB")


@pytest.fixture(scope="session")
def astronaut() -> Image.Image:
    data = pytest.importorskip("skimage.data")
    return Image.fromarray(data.astronaut())
