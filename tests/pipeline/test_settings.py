"""Settings: every knob from ANIPAINT_* variables, typed, with a clear error for a value a knob can't take."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anipaint.errors import SettingsError
from anipaint.settings import Settings, settings_from_env, to_env


def test_variables_are_read_with_the_field_types():
    s = settings_from_env({"ANIPAINT_JOBS": "3", "ANIPAINT_FACES": "off", "ANIPAINT_RESULT_TTL": "2.5",
                           "ANIPAINT_HOME": "~/anipaint-here", "ANIPAINT_DEFAULT_STYLE": "v1-hayao",
                           "ANIPAINT_THREADS": ""})
    assert (s.jobs, s.faces, s.result_ttl, s.default_style) == (3, False, 2.5, "v1-hayao")
    assert s.home == Path("~/anipaint-here").expanduser()
    assert s.threads == Settings().threads  # empty means "not set"


def test_derived_folders_follow_their_roots(tmp_path):
    s = settings_from_env({"ANIPAINT_SOURCES": str(tmp_path / "models"), "ANIPAINT_HOME": str(tmp_path / "h")})
    assert s.samples_dir == tmp_path / "samples"
    assert s.models_dir == tmp_path / "h" / "models"
    assert s.jobs_dir == tmp_path / "h" / "jobs"


@pytest.mark.parametrize("name,value", [("JOBS", "many"), ("RESULT_TTL", "1h"), ("FACES", "maybe")])
def test_a_value_the_knob_cant_take_is_a_clear_error(name, value):
    with pytest.raises(SettingsError, match=f"ANIPAINT_{name}='{value}'"):
        settings_from_env({f"ANIPAINT_{name}": value})


def test_to_env_round_trips():
    s = settings_from_env({"ANIPAINT_JOBS": "2", "ANIPAINT_FACES": "0", "ANIPAINT_QUEUE_SIZE": "5"})
    assert settings_from_env(to_env(s)) == s


def test_cli_reports_a_bad_variable_in_one_line():
    env = {**os.environ, "ANIPAINT_JOBS": "many"}
    proc = subprocess.run([sys.executable, "-m", "anipaint.cli", "styles"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["anipaint: error: ANIPAINT_JOBS='many': expected a whole number"]


@pytest.mark.parametrize("value,in_strips", [(None, True), ("strips", True), ("exact", True), ("tiles", False)])
def test_large_pictures_are_painted_in_strips_by_default_and_exact_still_means_strips(value, in_strips):
    """``ANIPAINT_LARGE_MODE=exact`` is what earlier releases documented; it keeps meaning the strips."""
    s = settings_from_env({"ANIPAINT_LARGE_MODE": value} if value else {})
    assert s.large_in_strips is in_strips


def test_the_configuration_document_lists_every_setting_as_generated():
    """docs/configuration.md is `make docs`'s output: a setting added, renamed or re-described without it fails."""
    from anipaint.settings import reference
    from support.paths import REPO

    document = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert document == reference(), "docs/configuration.md is stale: run `make docs`"
    for f in dataclasses.fields(Settings):
        assert f"`ANIPAINT_{f.name.upper()}`" in document and f.metadata["doc"]
