"""Engine backends: one interface, several ways to run a style's generator.

Every backend is a callable ``NCHW float32 in [-1, 1] → same shape`` (any H, W ≥ 8), built once per machine and
cached in ``<style_dir>/engine/`` under a key made of the engine recipe version, the torch and ONNX Runtime
versions, the CPU's instruction-set flags and the weights' checksum, so a new torch, a different CPU or new
weights rebuild instead of loading something stale.

=============  ==========================================================================================
``torch``      the style's plain network in eager PyTorch, float32 (every architecture; for ``onnx`` styles
               the network *is* an ONNX Runtime session)
``compiled``   AnimeGANv2 as :class:`~anipaint.engine.graphs.V2Graph` in bfloat16, channels-last, exported
               with dynamic H/W and compiled ahead of time by AOTInductor into a ``.pt2`` package (loads in
               milliseconds; the build takes ~30-80 s once). Imported graphs (the v3 styles) and AnimeGAN v1
               the same way through :mod:`anipaint.engine.graph_compile`, channels-last, their convolutions in
               bfloat16 where the CPU has native bf16 (AVX512_BF16 / AMX) and float32 elsewhere. A graph
               that computes a size in floating point (the JP face model) is exported at 512 x 512, the size
               its crops are painted at, and runs any other size on its eager network
``int8``       ``compiled`` with the five heavy convolutions in static int8 (oneDNN VNNI kernels); needs photos
               to calibrate (:func:`anipaint.engine.int8.photos`)
``onnxruntime`` AnimeGANv2 exported to ONNX (float32) and run by ONNX Runtime with all graph optimisations;
               imported graphs exported through ``torch.export`` (symbolic H/W, as ``compiled``)
``strips``     AnimeGAN v1/v2 layer by layer in row strips, channels-last, bf16 convolutions where the CPU has
               them (:mod:`anipaint.engine.streaming`, the same code that paints large pictures exactly);
               nothing to build. Much faster than the eager module for v1 and for the port's v2 files
=============  ==========================================================================================

Backends that don't apply to an architecture fall back to ``torch``. ``auto`` is the fastest backend whose
output stays within 35 dB PSNR of the reference, measured once per machine by :func:`anipaint.engine.prepare`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
from filelock import FileLock
from torch import Tensor

from anipaint import store
from anipaint.engine import threads
from anipaint.engine.cpu import cpu_flags
from anipaint.engine.tensors import from_tensor, to_tensor
from anipaint.networks.architectures import get_architecture
from anipaint.networks.padding import pad_to_multiple
from anipaint.registry import Style
from anipaint.settings import Settings

log = logging.getLogger("anipaint.engine")
ENGINE_VERSION = 4  # bump when a build recipe below changes
# Bump when something changes how fast the backends run relative to each other without changing a build (the
# process's allocator policy, say): auto measures again, the builds are kept.
MEASURE_VERSION = 3
NAMES = ("torch", "compiled", "int8", "onnxruntime", "strips")
NOTHING_TO_BUILD = {"torch", "strips"}
MULTIPLE = 4  # the v2 graphs take sides that are multiples of 4 (two stride-2 convs)
MIN_MULTIPLES = 3  # the graph exports take sides of at least 3 of their multiples (graph_compile.MIN_MULTIPLES)
MAX_SIDE = 4 * 2048  # export bound on H and W; larger pictures are tiled anyway

BUILDS: Counter[str] = Counter()  # artefacts built in this process, by backend name (tests read it)
_build_lock = threading.Lock()


class Backend:
    """A callable generator: NCHW float32 [-1, 1] → NCHW float32 [-1, 1], same size."""

    name = "torch"
    batches = False  # whether a call may carry several pictures (N > 1); else the caller loops

    def __call__(self, x: Tensor) -> Tensor:
        raise NotImplementedError


class TorchBackend(Backend):
    """The style's plain network (eager float32 torch module, graph module or ONNX generator)."""

    batches = True

    def __init__(self, network: Callable[[Tensor], Tensor]) -> None:
        self.network = network

    def __call__(self, x: Tensor) -> Tensor:
        with torch.inference_mode():
            return self.network(x)


def _pad4(x: Tensor) -> tuple[Tensor, int, int]:
    h, w = x.shape[-2:]
    return pad_to_multiple(x, MULTIPLE), h, w  # exactly as the network module pads


def _pad_graph(x: Tensor, multiple: int) -> tuple[Tensor, int, int]:
    """As the graph module and v1 pad, but to at least :data:`MIN_MULTIPLES` (tiny pictures pad a little more)."""
    h, w = x.shape[-2:]
    return pad_to_multiple(x, multiple, min_cells=MIN_MULTIPLES), h, w


class CompiledBackend(Backend):
    """An AOTInductor package; pads to the package's size multiple and passes channels-last memory.

    ``multiple`` None: the :class:`V2Graph` package (multiples of 4, at least 8x8, padded as the v2 module
    does); else the graph package's stride multiple, padded as the eager graph module and the v1 network pad.
    A package compiled for one size (its metadata says which) runs every other size on ``fallback``.
    """

    def __init__(self, path: Path, name: str = "compiled", jobs: int = 1, multiple: int | None = None,
                 fallback: Backend | None = None) -> None:
        from anipaint.engine.graph_compile import fixed_size_of

        self.name = name
        self.path = path
        self.multiple = multiple
        self.runner, metadata = load_package(path, jobs)
        self.fixed_size = fixed_size_of(metadata)
        self.fallback = fallback

    def __call__(self, x: Tensor) -> Tensor:
        given = x
        if self.multiple is not None:
            x, h, w = _pad_graph(x.float(), self.multiple)
        elif min(x.shape[-2:]) < 8:
            raise ValueError(f"input {tuple(x.shape[-2:])} is too small; AnimeGANv2 needs at least 8x8 pixels")
        else:
            x, h, w = _pad4(x.float())
        if _off_size(x, self.fixed_size):
            return _run_fallback(self.fallback, given, self.fixed_size)
        # The package was compiled for channels-last strides: any other layout would be read wrongly.
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            y = self.runner(x)
        return y[..., :h, :w]


def _off_size(x: Tensor, fixed: tuple[int, int] | None) -> bool:
    """Whether ``x`` (padded) is not the one size a fixed-size build takes. The package itself does not check:
    it would read past its buffers."""
    return fixed is not None and (x.shape[0] != 1 or tuple(x.shape[-2:]) != fixed)


def _run_fallback(fallback: Backend | None, x: Tensor, fixed: tuple[int, int] | None) -> Tensor:
    if fallback is None:
        raise ValueError(f"this build runs at {fixed} only, not {tuple(x.shape[-2:])}")
    return fallback(x)


def load_package(path: Path, jobs: int = 1) -> tuple[Callable[[Tensor], Tensor], dict[str, str]]:
    """Load an AOTInductor package and its metadata; ``jobs`` model instances so concurrent paints don't queue
    on one.

    The C++ loader directly: ``torch._inductor.aoti_load_package`` imports Dynamo and Inductor first, which
    costs ~1.2 s of the server's start for nothing (the package is already compiled).
    """
    loader_cls = getattr(getattr(torch._C, "_aoti", None), "AOTIModelPackageLoader", None)
    if loader_cls is None:  # a torch without the private loader: the public (slower to import) one
        model = torch._inductor.aoti_load_package(str(path), num_runners=max(1, jobs))
        return model, dict(model.get_metadata())
    loader = loader_cls(str(path), "model", False, max(1, jobs), -1)
    return (lambda x: loader.run([x])[0]), dict(loader.get_metadata())


class StripsBackend(Backend):
    """A v1/v2 module run by :mod:`anipaint.engine.streaming` (uint8 in and out, like every painted picture)."""

    name = "strips"

    def __init__(self, network, folder: Path | None = None) -> None:
        from anipaint.engine.streaming import for_network

        streamed = for_network(network, folder)
        if streamed is None:
            raise ValueError(f"no strip version of {type(network).__name__}")
        self.streamed = streamed

    def __call__(self, x: Tensor) -> Tensor:

        # Inputs come from to_tensor(uint8) and outputs go to from_tensor, so the uint8 round trip is exact.
        return to_tensor(self.streamed.paint(from_tensor(x)))


class OrtBackend(Backend):
    """An ONNX Runtime session over an exported graph (NCHW float32); pads as :class:`CompiledBackend`.

    A file exported at one size (its input shape says so) runs every other size on ``fallback``."""

    name = "onnxruntime"

    def __init__(self, path: Path, multiple: int | None = None, fallback: Backend | None = None) -> None:
        import onnxruntime as ort

        self.path = path
        self.multiple = multiple
        self.fallback = fallback
        self.session = ort.InferenceSession(str(path), threads.ort_options(), providers=["CPUExecutionProvider"])
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        dims = list(inp.shape)
        self.fixed_size = (dims[2], dims[3]) if all(isinstance(d, int) for d in dims[2:]) else None

    def __call__(self, x: Tensor) -> Tensor:
        given = x
        if self.multiple is None:
            x, h, w = _pad4(x.float())
        else:
            x, h, w = _pad_graph(x.float(), self.multiple)
        if _off_size(x, self.fixed_size):
            return _run_fallback(self.fallback, given, self.fixed_size)
        y = self.session.run(None, {self.input_name: x.contiguous().numpy()})[0]
        return torch.from_numpy(y)[..., :h, :w]


# ---- cache keys and paths -------------------------------------------------------------------------------


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


def cache_dir(style: Style, settings: Settings) -> Path:
    return store.style_dir(style, settings) / "engine"


def build_path(name: str, style: Style, settings: Settings, key: str) -> Path:
    suffix = ".onnx" if name == "onnxruntime" else ".pt2"
    return cache_dir(style, settings) / f"{name}-{key}{suffix}"


def applicable(style: Style) -> tuple[str, ...]:
    """Backends that can run this style here, plain first (its architecture's row)."""
    return get_architecture(style.architecture).backends


# ---- builders -------------------------------------------------------------------------------------------


def _state_dict(artefact: Path) -> dict[str, Tensor]:
    return torch.load(artefact, map_location="cpu", weights_only=True)


def _export_v2(graph: torch.nn.Module) -> torch.export.ExportedProgram:
    from torch.export import Dim, export

    # Inductor tunes loops for the example's sizes (its "size hints"); 512 px is the size that matters.
    example = torch.zeros(1, 3, 512, 512).contiguous(memory_format=torch.channels_last)
    kh, kw = Dim("kh", min=2, max=MAX_SIDE // MULTIPLE), Dim("kw", min=2, max=MAX_SIDE // MULTIPLE)
    with torch.no_grad():
        return export(graph, (example,), dynamic_shapes={"x": {2: MULTIPLE * kh, 3: MULTIPLE * kw}})


def _build_compiled(artefact: Path, out: Path, settings: Settings, int8: bool) -> None:
    from anipaint.engine.graphs import V2Graph

    sd = _state_dict(artefact)
    quant = None
    if int8:
        from anipaint.engine.int8 import calibrate, photos

        pictures = photos(settings, "calibrate")
        if not pictures:
            raise RuntimeError("no photos to calibrate int8 with (see anipaint.engine.int8.photos)")
        quant = calibrate(sd, pictures)
    graph = V2Graph(sd, torch.bfloat16, quant).eval()
    ep = _export_v2(graph)
    # Freezing (needed to lower quantize→dequantize→conv to oneDNN's int8 kernels) is only applied when grad is
    # off. It also miscompiled the all-bf16 graph in torch 2.13 (PSNR 13 dB), and bought nothing there.
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(ep, package_path=str(out), inductor_configs={"freezing": int8})


def _build_onnx(artefact: Path, out: Path) -> None:
    from anipaint.engine.graphs import V2Graph

    graph = V2Graph(_state_dict(artefact), torch.float32).eval()
    example = torch.zeros(1, 3, 64, 64)
    with torch.no_grad():
        torch.onnx.export(
            graph, (example,), str(out), dynamo=False, input_names=["x"], output_names=["y"], opset_version=17,
            dynamic_axes={"x": {2: "h", 3: "w"}, "y": {2: "h", 3: "w"}},
        )


def _generic(network) -> bool:
    """Whether the style's builds go through :mod:`anipaint.engine.graph_compile` (imported graphs, v1: networks
    that carry their size multiple) rather than the v2 recipe, which rebuilds the network from its weights."""
    return getattr(network, "size_multiple", None) is not None


def _build_graph(name: str, network, out: Path, settings: Settings) -> None:
    from anipaint.engine import graph_compile
    from anipaint.engine.int8 import packaged_photos, photos
    from anipaint.engine.precision import fast_conv_dtype

    if name == "onnxruntime":
        graph_compile.build_onnx(network, out)
    else:
        pictures = photos(settings, "check", side=256) + packaged_photos(256)
        dtype = graph_compile.faithful_conv_dtype(network, pictures, fast_conv_dtype())
        graph_compile.build_package(network, out, dtype)


def ensure_built(name: str, style: Style, artefact: Path, settings: Settings, key: str | None = None,
                 network=None) -> Path:
    """The cached build of backend ``name`` for a style, building it (under a file lock) if missing.

    ``network`` (the style's eager network) is what the generic builds compile; v2 builds read the artefact."""
    key = key or engine_key(artefact)
    path = build_path(name, style, settings, key)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock, FileLock(str(path) + ".lock"):
        if path.is_file():  # another process built it while we waited
            return path
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}-", suffix=path.suffix, dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            if name in ("compiled", "onnxruntime") and _generic(network):
                _build_graph(name, network, tmp, settings)
            elif name in ("compiled", "int8"):
                _build_compiled(artefact, tmp, settings, int8=name == "int8")
            elif name == "onnxruntime":
                _build_onnx(artefact, tmp)
            else:
                raise ValueError(f"backend {name!r} has nothing to build")
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the store is shared like the weights next to it
            os.replace(tmp, path)
            BUILDS[name] += 1
        finally:
            tmp.unlink(missing_ok=True)
    return path


def open_named(name: str, style: Style, artefact: Path, settings: Settings, network, key: str | None = None) -> Backend:
    """Backend ``name`` for a style (built if needed); ``torch`` when ``name`` doesn't apply to the style."""
    if name not in applicable(style) or name == "torch":
        return TorchBackend(network)
    if name == "strips":
        return StripsBackend(network, settings.scratch_dir)
    path = ensure_built(name, style, artefact, settings, key, network)
    multiple = network.size_multiple if _generic(network) else None
    fallback = TorchBackend(network)  # for the sizes a fixed-size build doesn't take
    if name == "onnxruntime":
        return OrtBackend(path, multiple, fallback)
    return CompiledBackend(path, name, settings.jobs, multiple, fallback)


def auto_path(style: Style, settings: Settings, key: str) -> Path:
    return cache_dir(style, settings) / f"auto-{key}-m{MEASURE_VERSION}.json"


def read_auto(style: Style, settings: Settings, key: str) -> dict | None:
    try:
        return json.loads(auto_path(style, settings, key).read_text())
    except (OSError, ValueError):
        return None


def open_backend(style: Style, artefact: Path, settings: Settings, network, name: str = "auto") -> Backend:
    """The backend the settings ask for.

    ``auto`` uses the choice measured on this machine by :func:`anipaint.engine.prepare` (``anipaint models
    prepare``), cached next to the weights. Without one it runs the plain network rather than spending a
    minute building and measuring in the middle of a request; naming a backend builds it on first use.
    """
    name = (name or "auto").lower()
    if name not in NAMES and name != "auto":
        raise ValueError(f"unknown backend {name!r}; expected auto or one of {', '.join(NAMES)}")
    if len(applicable(style)) == 1:
        return TorchBackend(network)
    key = engine_key(artefact)
    if name != "auto":
        return open_named(name, style, artefact, settings, network, key)
    cached = read_auto(style, settings, key) or {}
    name = cached.get("choice") or "torch"
    if name not in NOTHING_TO_BUILD and not build_path(name, style, settings, key).is_file():
        name = "torch"  # the build was removed since it was measured: don't rebuild mid-request
    try:
        return open_named(name, style, artefact, settings, network, key)
    except (OSError, RuntimeError) as exc:  # e.g. no disk left to unpack a compiled package: paint all the same
        log.warning("%s: the %s engine did not load (%s); painting with the plain network", style.id, name, exc)
        return TorchBackend(network)
