"""The engine tests' shared fixtures: the session store's settings (with small tiles), v2-hayao's artefact and
builds, and real photos at 512 px."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.settings import reload_settings
from support.photos import photo_at

# Styles the engine tests paint, converted in the session store.
CONVERTED = ("v2-hayao", "v1-hayao", "v3-cute", "v3-hayao", "v3-shinkai")


@pytest.fixture(scope="module")
def settings(prepared_store):
    s = reload_settings()
    missing = [i for i in CONVERTED if not store.is_converted(get_style(i), s)]
    assert not missing, f"not converted: {missing}"
    return dataclasses.replace(s, tile_size=256, tile_overlap=64)


@pytest.fixture(scope="module")
def v2(settings):
    style = get_style("v2-hayao")
    return style, store.artefact_path(style, settings)


@pytest.fixture(scope="module")
def auto_record(settings, engine_builds):
    """One auto measurement: builds every v2 backend and caches the choice (what `models prepare` does)."""
    return engine_builds("v2-hayao")




@pytest.fixture(scope="module")
def photos(group_photo, astronaut) -> dict[str, np.ndarray]:
    out = {"group": photo_at(group_photo), "astronaut": photo_at(astronaut)}
    data = pytest.importorskip("skimage.data")
    out["coffee"] = photo_at(Image.fromarray(data.coffee()))
    return out
