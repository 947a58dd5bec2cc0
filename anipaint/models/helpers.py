"""The models that are not styles: the face detector and the person segmenter, kept in the store beside the styles.

Layout under ``settings.models_dir``::

    face/yunet.onnx                 the face detector (the original ONNX file, copied once it passes its checksum)
    segmenter/model.pt, meta.json   the person segmenter, imported into the graph IR and stamped (models/stamp.py)
    segmenter/model.onnx            its graph traced to ONNX at its one input size, for ONNX Runtime

Each is made on first use (and by ``anipaint models prepare``, through :func:`anipaint.models.store.convert`); both
return None when their source file is absent or fails its checksum, so that a paint goes on without faces or portrait
mode.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from filelock import FileLock

from anipaint import importers
from anipaint.models import stamp
from anipaint.models.downloads import sha256_file
from anipaint.models.registry import FACE_DETECTOR, SEGMENTER, SEGMENTER_IMPORTER
from anipaint.models.sources import locate_source
from anipaint.settings import Settings, get_settings

SEGMENTER_SIDE = 256  # the segmenter's one input size: 256 x 256 RGB
SEGMENTER_ONNX = "model.onnx"
log = logging.getLogger("anipaint.models")


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def face_detector_path(settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / "face" / "yunet.onnx"


def install_face_detector(settings: Settings | None = None) -> Path | None:
    s = _settings(settings)
    dest = face_detector_path(s)
    if dest.is_file():
        return dest
    src = locate_source(FACE_DETECTOR, s)
    if src is None or sha256_file(src) != FACE_DETECTOR.sha256:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(s.models_dir / ".face.lock")):
        if not dest.is_file():
            tmp = dest.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
    return dest


def segmenter_path(settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / "segmenter" / "model.pt"


def install_segmenter(settings: Settings | None = None) -> Path | None:
    """The person segmenter as a graph artefact, converted on first use and again when the converter code
    changes; None when its source is absent or fails its checksum."""
    s = _settings(settings)
    src = locate_source(SEGMENTER, s)
    if src is None or sha256_file(src) != SEGMENTER.sha256:
        return None
    dest = segmenter_path(s)
    expected = {"format_version": stamp.FORMAT_VERSION, "converter": stamp.converter_digest(),
                "source": SEGMENTER.sha256}
    if dest.is_file() and stamp.read_meta(dest.parent) == expected:
        return dest
    s.models_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(s.models_dir / ".segmenter.lock")):
        if dest.is_file() and stamp.read_meta(dest.parent) == expected:
            return dest
        work = Path(tempfile.mkdtemp(prefix=".segmenter-", dir=s.models_dir))
        try:
            importers.convert(SEGMENTER_IMPORTER, [src], work)
            (work / "meta.json").write_text(json.dumps(expected))
            shutil.rmtree(dest.parent, ignore_errors=True)
            os.replace(work, dest.parent)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return dest


def segmenter_onnx(path: Path) -> Path | None:
    """The segmenter's graph (artefact ``path``) traced to ONNX beside it, made once (on first use or by ``anipaint
    models prepare``); None where the export fails (the eager graph paints the same map).

    Its shapes are constants of its one input size, so ``torch.export`` cannot trace it with symbolic sizes; the
    TorchScript tracer reads them as the constants they are. A new conversion replaces the folder, and this with it.
    """
    out = path.with_name(SEGMENTER_ONNX)
    if out.is_file():
        return out
    try:
        with FileLock(str(out) + ".lock"):
            if not out.is_file():
                _export_segmenter(path, out)
    except Exception as exc:  # noqa: BLE001 - the eager graph paints the same map
        log.warning("the person segmenter runs eagerly: its ONNX export failed (%s)", exc)
        return None
    return out


def _export_segmenter(path: Path, out: Path) -> None:
    import torch

    from anipaint.networks.graph_module import GraphModule

    module = GraphModule.from_file(path).eval()
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on the shape values it reads as constants
            torch.onnx.export(module, (torch.zeros(1, 3, SEGMENTER_SIDE, SEGMENTER_SIDE),), tmp, dynamo=False,
                              input_names=["x"], output_names=["person"])
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
