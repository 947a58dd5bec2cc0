"""How the fast backends are built, and where the builds are kept.

Builds are cached in ``<style_dir>/engine/`` under a key made of the recipe version, the torch and ONNX Runtime
versions, the CPU's instruction-set flags and the weights' checksum, so a new torch, a different CPU or new
weights rebuild instead of loading something stale. Which backend uses which recipe: :data:`.backends.BACKENDS`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from filelock import FileLock
from torch import Tensor

from anipaint.engine.compile.inductor import compile_package
from anipaint.engine.runtime.cpu import cpu_flags
from anipaint.engine.runtime.progress import quiet
from anipaint.models import store
from anipaint.models.registry import Style
from anipaint.networks.animeganv2 import MIN_SIZE, SIZE_MULTIPLE
from anipaint.settings import Settings

ENGINE_VERSION = 8  # bump when a build recipe below changes
MAX_SIDE = 4 * 2048  # export bound on H and W; larger pictures are tiled anyway
BUILDS: Counter[str] = Counter()  # artefacts built in this process, by backend name (tests read it)
_build_lock = threading.Lock()
Made = TypeVar("Made")
log = logging.getLogger("anipaint.engine.builds")


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def engine_key(artefact: Path) -> str:
    """Version + CPU + weights key for cached builds (16 hex digits)."""
    try:
        import onnxruntime as ort

        ort_version = ort.__version__
    except ImportError:
        ort_version = "-"
    parts = [str(ENGINE_VERSION), torch.__version__, ort_version, ",".join(cpu_flags()), _file_digest(artefact)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


_keys: dict[tuple[str, int, int], str] = {}


def cached_engine_key(artefact: Path) -> str:
    """:func:`engine_key`, remembered per file version (it hashes the weights, which a status check should not
    pay each time)."""
    stat = artefact.stat()
    marker = (str(artefact), stat.st_mtime_ns, stat.st_size)
    if marker not in _keys:
        _keys[marker] = engine_key(artefact)
    return _keys[marker]


def cache_dir(style: Style, settings: Settings) -> Path:
    return store.style_dir(style, settings) / "engine"


def shape_tag(style: Style) -> str:
    """What a build's file name adds for a face model exported at its ``paint_shape`` (a new shape, a new build)."""
    return f"-{style.paint_shape[0]}x{style.paint_shape[1]}" if style.paint_shape else ""


def build_file(name: str, suffix: str, style: Style, settings: Settings, key: str) -> Path:
    return cache_dir(style, settings) / f"{name}-{key}{shape_tag(style)}{suffix}"


# ---- recipes --------------------------------------------------------------------------------------------


def _state_dict(artefact: Path) -> dict[str, Tensor]:
    return torch.load(artefact, map_location="cpu", weights_only=True)


def _export_v2(graph: torch.nn.Module) -> torch.export.ExportedProgram:
    from torch.export import Dim, export

    # Inductor tunes loops for the example's sizes (its "size hints"); 512 px is the size that matters.
    example = torch.zeros(1, 3, 512, 512).contiguous(memory_format=torch.channels_last)
    kh, kw = (Dim(name, min=MIN_SIZE // SIZE_MULTIPLE, max=MAX_SIDE // SIZE_MULTIPLE) for name in ("kh", "kw"))
    with torch.no_grad():
        return export(graph, (example,), dynamic_shapes={"x": {2: SIZE_MULTIPLE * kh, 3: SIZE_MULTIPLE * kw}})


@quiet()
def v2_package(artefact: Path, out: Path, settings: Settings, int8: bool) -> None:
    """AnimeGANv2 rebuilt from its weights as the bf16 export graph (int8: its heavy convolutions quantised), compiled
    by AOTInductor."""
    from anipaint.engine.compile.v2_graph import V2Graph

    sd = _state_dict(artefact)
    quant = None
    if int8:
        from anipaint.engine.compile.int8 import calibrate, photos

        pictures = photos(settings, "calibrate")
        if not pictures:
            raise RuntimeError("no photos to calibrate int8 with (see anipaint.engine.compile.int8.photos)")
        quant = calibrate(sd, pictures)
    graph = V2Graph(sd, torch.bfloat16, quant).eval()
    ep = _export_v2(graph)
    # Freezing (needed to lower quantize→dequantize→conv to oneDNN's int8 kernels) is only applied when grad is
    # off. It also miscompiled the all-bf16 graph in torch 2.13 (PSNR 13 dB), and bought nothing there.
    compile_package(ep, out, {"freezing": int8})


@quiet()
def v2_onnx(artefact: Path, out: Path) -> None:
    """AnimeGANv2 rebuilt from its weights in float32, exported to ONNX with dynamic H and W."""
    from anipaint.engine.compile.v2_graph import V2Graph

    graph = V2Graph(_state_dict(artefact), torch.float32).eval()
    example = torch.zeros(1, 3, 64, 64)
    with torch.no_grad():
        torch.onnx.export(
            graph, (example,), str(out), dynamo=False, input_names=["x"], output_names=["y"], opset_version=17,
            dynamic_axes={"x": {2: "h", 3: "w"}, "y": {2: "h", 3: "w"}},
        )


@quiet()
def network_package(network, out: Path, settings: Settings, shape: tuple[int, int] | None = None) -> None:
    """An eager network (imported graph, v1) compiled by AOTInductor, its convolutions in bf16 where faithful;
    ``shape``: the one size a graph without symbolic sizes is exported at (a face model's ``paint_shape``)."""
    from anipaint.engine.compile import graph_program
    from anipaint.engine.compile.int8 import packaged_photos, photos
    from anipaint.engine.compile.precision import fast_conv_dtype

    pictures = photos(settings, "check", side=256) + packaged_photos(256)
    dtype = graph_program.faithful_conv_dtype(network, pictures, fast_conv_dtype())
    graph_program.build_package(network, out, dtype, fixed_shape=shape)


# Calibration photos' long side: the norms keep activation ranges alike across sizes, and the histogram observers
# cost time in proportion to the pixels.
CALIBRATION_SIDE = 384


@quiet()
def network_int8_package(network, out: Path, settings: Settings, shape: tuple[int, int] | None = None) -> None:
    """An imported graph's dense 3x3 convolutions in int8 (int8-mixed-bf16 where the CPU has native bf16),
    calibrated on real photos (:mod:`anipaint.engine.compile.int8_graph`)."""
    from anipaint.engine.compile import graph_program, int8_graph
    from anipaint.engine.compile.int8 import packaged_photos, photos
    from anipaint.engine.compile.precision import fast_conv_dtype

    fast = fast_conv_dtype()
    if graph_program.faithful_conv_dtype(network, photos(settings, "check", side=256) + packaged_photos(256),
                                         fast) != fast:
        raise RuntimeError(f"not faithful with {fast} convolutions, so not with int8 ones either")
    pictures = photos(settings, "calibrate", side=CALIBRATION_SIDE) + packaged_photos(CALIBRATION_SIDE)
    int8_graph.build_package(network, out, pictures, fast, shape)


@quiet()
def network_onnx(network, out: Path, shape: tuple[int, int] | None = None) -> None:
    """An eager network exported to ONNX (float32) through torch.export (``shape``: :func:`network_package`'s)."""
    from anipaint.engine.compile import graph_program

    graph_program.build_onnx(network, out, shape)


def made_once(lock: Path, read: Callable[[], Made | None], make: Callable[[], Made]) -> Made:
    """``read()``, else ``make()`` under a file lock at ``lock``, looking again once the lock is held: another
    process (``models prepare``, the server's preparation, a second worker) may be making the same thing."""
    found = read()
    if found is not None:
        return found
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        found = read()
        return found if found is not None else make()


def ensure_built(name: str, path: Path, recipe: Callable[[Path], None]) -> Path:
    """The cached build at ``path`` of backend ``name``, made by ``recipe(out)`` (under a file lock) if missing."""
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock, FileLock(str(path) + ".lock"):
        if path.is_file():  # another process built it while we waited
            return path
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}-", suffix=path.suffix, dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        started = time.monotonic()
        try:
            recipe(tmp)
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the store is shared like the weights next to it
            os.replace(tmp, path)
            BUILDS[name] += 1
            seconds = time.monotonic() - started
            log.debug("built %s in %.1f s", path, seconds, extra={"build_path": str(path), "build_seconds": seconds})
        finally:
            tmp.unlink(missing_ok=True)
    return path
