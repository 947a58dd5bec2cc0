"""The ONNX files the page paints with in the browser (ONNX Runtime Web): one per style, dynamic H and W.

Each device model is made from the style's ``onnxruntime`` build (:data:`~anipaint.engine.backends.BACKENDS`, float32,
the file the server's ONNX Runtime backend runs), never exported a second time. Its weights are stored in float16 when
that stays faithful (:func:`anipaint.quality.faithful`: ≥ 40 dB and almost no far-off pixels, 5 dB over the 35 dB the
browser must keep against the server) to the float32 file on the check photos, float32 otherwise. Before that, each
norm's element-wise chain becomes ONNX Runtime's ``InstanceNormalization`` and each per-channel mean a
``GlobalAveragePool`` (:mod:`.norms`), and each 2× bilinear upsampling one ``Resize`` (:mod:`.upsample`): fewer passes
over the activations and fewer full-size tensors, which cost WebAssembly's 128-bit SIMD and its heap more than they cost
native code; checked like the weights. Only the *stored* weights are halved: each becomes a float16 initializer behind a
``Cast`` to float32, which ONNX Runtime folds when the session loads, so the browser computes in float32 (WebAssembly
has no float16 kernels) and the download is half the size.

The file and a record of the decision (``device-<key>-v<version>.onnx`` / ``.json``) sit in the style's engine folder
under the same key as every other build (:func:`~anipaint.engine.builds.engine_key`): new weights, a new torch or ONNX
Runtime make new ones. ``anipaint models prepare`` and the background warm-up make them; :func:`read` only looks.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from anipaint.engine import backends, builds
from anipaint.models import store
from anipaint.models.registry import Style
from anipaint.networks.animeganv2 import MIN_SIZE, SIZE_MULTIPLE
from anipaint.networks.architectures import get_architecture
from anipaint.settings import Settings

DEVICE_VERSION = 3  # bump when the recipe below changes
NAME = "device"
MIN_CELLS = 3  # the exported graphs take H and W of at least this many size multiples (graph_compile.MIN_MULTIPLES)


@dataclass(frozen=True)
class DeviceModel:
    """What the browser needs to fetch, check and feed a style's device model."""

    style: str
    file: str  # the file's name in the style's engine folder
    sha256: str
    bytes: int
    weights: str  # "float16" or "float32"
    psnr_fp16: float | None  # float16 weights against the float32 file, worst check photo (100: identical)
    rewritten: int  # chains rewritten by .onnx_norms and .onnx_upsample (0: the graph as exported)
    multiple: int  # H and W are padded (reflected, bottom/right) to a multiple of this
    min_cells: int  # ...and to at least this many multiples
    min_side: int  # smaller pictures are edge-padded to this first, as the server's engine does
    version: int = DEVICE_VERSION


def unsupported(style: Style) -> str | None:
    """Why a style cannot paint on the device, or None when it can (once its model is made)."""
    if style.paints_faces_only:
        return "a face model: it paints aligned face crops, which needs the server's face detector"
    if backends.PORTABLE not in get_architecture(style.architecture).backends:
        return "its network has no ONNX export here (AnimeGAN v1 and the PyTorch port's files)"
    return None


def _record_path(style: Style, settings: Settings, key: str) -> Path:
    return builds.build_file(NAME, f"-v{DEVICE_VERSION}.json", style, settings, key)


def read(style: Style, settings: Settings) -> DeviceModel | None:
    """The style's device model if it has been made for its current weights (and the file is still there)."""
    artefact = store.artefact_path(style, settings)
    if unsupported(style) or not artefact.is_file():
        return None
    try:
        model = DeviceModel(**json.loads(_record_path(style, settings, builds.cached_engine_key(artefact)).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return model if (builds.cache_dir(style, settings) / model.file).is_file() else None


def path_of(model: DeviceModel, style: Style, settings: Settings) -> Path:
    return builds.cache_dir(style, settings) / model.file


def ensure(style: Style, settings: Settings) -> DeviceModel:
    """The style's device model, made now if missing (the style must be converted). Reuses the ``onnxruntime``
    build, building it first where it is missing (tens of seconds)."""
    reason = unsupported(style)
    if reason:
        raise ValueError(f"{style.id} cannot paint on the device: {reason}")
    found = read(style, settings)
    if found is not None:
        return found
    artefact = store.artefact_path(style, settings)
    key = builds.cached_engine_key(artefact)
    return builds.made_once(_record_path(style, settings, key).with_suffix(".lock"), lambda: read(style, settings),
                            lambda: _make(style, settings, artefact, key))


def float_build(style: Style, settings: Settings, key: str) -> Path:
    """The style's ``onnxruntime`` build (float32), built first where it is missing (tens of seconds)."""
    from anipaint.engine import load_network

    artefact = store.artefact_path(style, settings)
    kind = backends.BACKENDS[backends.PORTABLE]
    path = backends.build_path(kind.name, style, settings, key)
    if path.is_file():
        return path
    return builds.ensure_built(kind.name, path, kind.recipe(style, artefact, settings, load_network(style, artefact)))


def _make(style: Style, settings: Settings, artefact: Path, key: str) -> DeviceModel:
    from anipaint.engine import load_network

    network = load_network(style, artefact)
    kind = backends.BACKENDS[backends.PORTABLE]
    fp32 = builds.ensure_built(kind.name, backends.build_path(kind.name, style, settings, key),
                               kind.recipe(style, artefact, settings, network))
    started = time.monotonic()  # the device model's own making, after the build it starts from
    from_weights = get_architecture(style.architecture).builds_from == "weights"
    multiple = SIZE_MULTIPLE if from_weights else int(network.size_multiple)
    min_cells = 1 if from_weights else MIN_CELLS
    _check_dynamic(fp32, style)
    out = builds.build_file(NAME, f"-v{DEVICE_VERSION}.onnx", style, settings, key)
    from anipaint.quality import faithful

    check_multiple = None if from_weights else multiple
    # The rewritten graph first, then the graph as exported; in each, float16 weights if they hold, else float32
    # (the rewritten one only if it holds itself: a rewrite that fails to load or run counts as not holding).
    for graph, rewritten in (rewritten_graph(fp32), rewritten_graph(fp32, rewrite=False)):
        half = _half_weights(graph)
        worst = worst_psnr(fp32, half, settings, check_multiple)
        if worst is not None and faithful(*worst):
            data = half
            break
        data = graph.SerializeToString()
        if not rewritten or faithful(*(worst_psnr(fp32, data, settings, check_multiple) or (0.0, 1.0))):
            break
    write_whole(out, data)
    model = DeviceModel(
        style=style.id, file=out.name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data),
        weights="float16" if data is half else "float32",
        psnr_fp16=None if worst is None else round(min(worst[0], 100.0), 2),  # 100: identical (JSON has no inf)
        rewritten=rewritten, multiple=multiple, min_cells=min_cells, min_side=MIN_SIZE,
    )
    write_whole(_record_path(style, settings, key), json.dumps(asdict(model), indent=1).encode())
    seconds = time.monotonic() - started
    builds.log.debug("built %s in %.1f s", out, seconds, extra={"build_path": str(out), "build_seconds": seconds})
    return model


def write_whole(path: Path, data: bytes) -> None:
    """Whole or not at all: another process may be reading the folder."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _check_dynamic(path: Path, style: Style) -> None:
    import onnx

    dims = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    if any(d.HasField("dim_value") for d in list(dims)[2:]):
        raise ValueError(f"{style.id}: its ONNX export runs at one size only, so it cannot paint on the device")


def rewritten_graph(path: Path, rewrite: bool = True):
    """The float32 file's graph (an ``onnx.ModelProto``) with its norms and upsamplings rewritten, and how many
    nodes were."""
    import onnx

    from anipaint.engine.onnx.norms import fuse_instance_norms, pooled_means
    from anipaint.engine.onnx.upsample import upsample_to_resize

    model = onnx.load(str(path))
    if not rewrite:
        return model, 0
    rewritten = fuse_instance_norms(model) + pooled_means(model) + upsample_to_resize(model)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError:  # a rewrite the checker refuses: the graph as exported instead
        return onnx.load(str(path)), 0
    return model, rewritten


def _half_weights(model) -> bytes:
    """The ONNX file with every float32 weight tensor stored as float16 behind a Cast back to float32.

    onnx's own helpers rather than onnxconverter-common's float16 converter: that one also moves the computation
    to float16, which ONNX Runtime Web's WebAssembly kernels do not have. Small tensors (shapes, scales, biases
    of a few values) stay float32: they cost nothing to download and some feed shape arithmetic."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = type(model).FromString(model.SerializeToString())  # a copy: the float32 graph stays as it is
    graph = model.graph
    casts = []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < 64:
            continue
        name = init.name
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), f"{name}__fp16")
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [half.name], [name], to=TensorProto.FLOAT, name=f"{name}__cast"))
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def worst_psnr(fp32: Path, half: bytes, settings: Settings, multiple: int | None) -> tuple[float, float] | None:
    """(PSNR, far-off share) of the candidate file ``half`` against the float32 one on the worst check photo,
    both in ONNX Runtime; None if the candidate does not load or run."""
    import onnxruntime as ort

    from anipaint.engine.compile.int8 import packaged_photos, photos
    from anipaint.engine.runners import OrtBackend
    from anipaint.engine.tensors import from_tensor
    from anipaint.quality import far_share, psnr

    want = OrtBackend(fp32, multiple)
    try:
        with tempfile.NamedTemporaryFile(suffix=".onnx") as tmp:
            tmp.write(half)
            tmp.flush()
            got = OrtBackend(Path(tmp.name), multiple)
    except ort.capi.onnxruntime_pybind11_state.Fail:
        return None
    worst: tuple[float, float] | None = None
    for x in photos(settings, "check", side=256) + packaged_photos(256):
        try:
            a = from_tensor(got(x))
        except ort.capi.onnxruntime_pybind11_state.RuntimeException:  # e.g. a shape a rewrite got wrong
            return None
        b = from_tensor(want(x))
        measured = (psnr(a, b), far_share(a, b))
        worst = measured if worst is None or measured[0] < worst[0] else (worst[0], max(worst[1], measured[1]))
    return worst


def make_note(style: Style, settings: Settings) -> str:
    """Make the style's device model now if it can have one (``models prepare``, the background warm-up);
    its line: ``""`` (it cannot have one), ``"float16 weights, 2.4 MB"`` or why it failed. Never raises: the
    server paints the style all the same."""
    if unsupported(style):
        return ""
    from anipaint.engine.runtime import progress

    progress.step(style.id, "making the device model")
    try:
        model = ensure(style, settings)
    except Exception as exc:  # noqa: BLE001 - reported in the line; painting on the server is unaffected
        return f"device model failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    return f"{model.weights} weights, {model.bytes / 1e6:.1f} MB"
