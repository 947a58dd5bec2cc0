"""A damaged or wrong model file is refused by every importer with a sentence that names the file, as an
:class:`~anipaint.errors.AnipaintError` (so the CLI shows one line), never a parser's own exception."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from anipaint import importers
from anipaint.errors import AnipaintError, ModelImportError

JUNK = b"not a model at all, just some words"


def _junk_sources(importer: str, folder: Path) -> list[Path]:
    """What a damaged download of each importer's sources looks like: the right names, the wrong bytes."""
    if importer == "saved_model":
        (folder / "saved").mkdir()
        (folder / "saved" / "saved_model.pb").write_bytes(JUNK)
        return [folder / "saved"]
    if importer == "tfjs_v1":
        (folder / "model.json").write_bytes(JUNK)
        (folder / "group1-shard1of1.bin").write_bytes(JUNK)
        return [folder / "model.json", folder / "group1-shard1of1.bin"]
    suffix = {"torch_port": ".pt", "onnx_graph": ".onnx", "graphdef_pb": ".pb"}.get(importer, ".tflite")
    (folder / f"model{suffix}").write_bytes(JUNK)
    return [folder / f"model{suffix}"]


@pytest.mark.parametrize("importer", sorted(importers.CONVERTERS))
def test_every_importer_refuses_a_damaged_file_with_a_sentence(importer: str, tmp_path: Path) -> None:
    sources = _junk_sources(importer, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ModelImportError) as refused:
        importers.convert(importer, sources, out)
    assert isinstance(refused.value, AnipaintError)
    message = str(refused.value)
    assert any(p.name in message for p in sources), message
    assert "\n" not in message


def test_a_damaged_graph_file_reaches_the_cli_as_one_line(tmp_path: Path) -> None:
    """``anipaint models add`` with a file that claims to be v3-shinkai's frozen graph but is not one."""
    junk = tmp_path / "AnimeGANv3_Shinkai_37.pb"
    junk.write_bytes(JUNK)
    proc = subprocess.run([sys.executable, "-m", "anipaint.cli", "models", "add", str(junk)], capture_output=True,
                          text=True, env={"ANIPAINT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anipaint: error:"), proc.stderr
