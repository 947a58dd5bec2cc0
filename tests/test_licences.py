"""Licences as data, and commercial-only mode through the library, the CLI and the README.

A commercial-only installation offers and paints only the styles whose weights' licence allows commercial use
(the Apache-2.0 CartoonGAN rows); every other style is refused with one sentence that names its licence.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from anipaint import get_painter, store
from anipaint.errors import LicenceError
from anipaint.registry import LICENCE_IDS, LICENCES, all_styles, get_style
from anipaint.settings import reload_settings
from conftest import GROUP_PHOTO, REPO

COMMERCIAL = [s.id for s in all_styles() if s.licence.commercial]
NON_COMMERCIAL = [s.id for s in all_styles() if not s.licence.commercial]


def _commercial_settings():
    return dataclasses.replace(reload_settings(), commercial_only=True)


def _cli(*args: str, commercial_only: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANIPAINT_COMMERCIAL_ONLY": "1" if commercial_only else "0"}
    return subprocess.run([sys.executable, "-m", "anipaint.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_every_style_carries_a_licence_from_the_table() -> None:
    for style in all_styles():
        assert style.licence in LICENCES, style.id
        assert style.licence.id in LICENCE_IDS
        assert style.licence.text and style.licence.source.startswith("https://"), style.id
    assert {lic.id for lic in LICENCES} == set(LICENCE_IDS)
    assert [lic.id for lic in LICENCES if lic.commercial] == ["Apache-2.0"]
    cartoongan = [lic for lic in LICENCES if lic.id == "Apache-2.0"][0]
    assert "anime films" in cartoongan.note


def test_readme_licence_table_names_every_style_with_its_licence() -> None:
    readme = (REPO / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| [^|]+ \| `?([A-Za-z0-9.-]+)`? \|", readme, re.M))
    for style in all_styles():
        assert rows.get(style.id) == style.licence.id, f"README licence row for {style.id}"
    assert "anime film" in readme


def test_commercial_only_refuses_every_other_style_by_its_licence(prepared_store) -> None:
    settings = _commercial_settings()
    for style_id in NON_COMMERCIAL:
        with pytest.raises(LicenceError, match=rf"'{style_id}'.*licence \({get_style(style_id).licence.id}\)"):
            get_painter(style_id, settings)
    with pytest.raises(LicenceError, match="non-commercial"):
        get_painter("hayao", settings)  # an alias whose every candidate is non-commercial
    offered = [st.style.id for st in store.style_status(settings)]
    assert offered == COMMERCIAL  # today's table may have none: then nothing at all is offered


def test_default_style_falls_back_to_an_offered_one(prepared_store) -> None:
    settings = _commercial_settings()
    usable = [st.style.id for st in store.style_status(settings) if st.available]
    if usable:
        assert store.resolve(None, settings).id == usable[0]
    else:
        with pytest.raises(LicenceError, match="no style available here is cleared for commercial use"):
            store.resolve(None, settings)
    assert store.resolve(None, reload_settings()).id == reload_settings().default_style  # off: unchanged


def test_cli_lists_only_offered_styles_and_refuses_the_rest_with_the_library_sentence(prepared_store, tmp_path):
    listed = _cli("styles")
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines() if line and line.split()[0] in
           {s.id for s in all_styles()}]
    assert ids == COMMERCIAL
    if not COMMERCIAL:
        assert "no style here is cleared for commercial use" in listed.stdout
    assert all(f"  {s}  " not in listed.stdout for s in NON_COMMERCIAL)

    with pytest.raises(LicenceError) as refused:
        get_painter("v3-cute", _commercial_settings())
    proc = _cli("convert", str(GROUP_PHOTO), str(tmp_path / "out.png"), "--style", "v3-cute")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"anipaint: error: {refused.value}"
    assert not (tmp_path / "out.png").exists()

    everything = _cli("styles", commercial_only=False)
    assert all(s in everything.stdout for s in NON_COMMERCIAL)
    assert "non-commercial" in everything.stdout  # each line names its licence


@pytest.mark.parametrize("style_id", COMMERCIAL)
def test_commercial_only_paints_the_apache_styles(prepared_store, group_photo, style_id) -> None:
    painter = get_painter(style_id, _commercial_settings())
    out = np.asarray(painter.paint(group_photo, faces=False).convert("RGB"), np.float64)
    photo = np.asarray(group_photo.resize(out.shape[1::-1]), np.float64)
    assert out.shape == (512, 512, 3)
    assert np.abs(out - photo).mean() > 8  # restyled
