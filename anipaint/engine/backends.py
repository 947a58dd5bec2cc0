"""The table of engine backends (:data:`BACKENDS`: how each is built, opened and stored, what it needs of the CPU)
and the one place that resolves which backend paints a style on this machine (:func:`planned`).

Every backend is a callable ``NCHW float32 in [-1, 1] → same shape`` (:mod:`.runners`), built once per machine
(:mod:`.builds`, which also keys the cache).

=============  ==========================================================================================
``torch``      the style's plain network in eager PyTorch, float32 (every architecture; for ``onnx`` styles
               the network *is* an ONNX Runtime session)
``compiled``   AnimeGANv2 as :class:`~anipaint.engine.compile.v2_graph.V2Graph` in bfloat16, channels-last, exported
               with dynamic H/W and compiled ahead of time by AOTInductor into a ``.pt2`` package (loads in
               milliseconds; the build takes ~30-80 s once). Imported graphs (the v3 styles) and AnimeGAN v1
               the same way through :mod:`anipaint.engine.compile.graph_program`, channels-last, their convolutions in
               bfloat16 where the CPU has native bf16 (AVX512_BF16 / AMX) and float32 elsewhere. A graph
               that computes a size in floating point (the JP face model) is exported at the one size its
               crops are painted at (the style's ``paint_shape``), and runs any other size on its eager network
``int8``       ``compiled`` with its heavy convolutions in static int8 (oneDNN VNNI / AMX kernels): v2's five
               heaviest (:mod:`anipaint.engine.compile.int8`); an imported graph's dense 3x3 ones, int8-mixed-bf16
               through torchao's PT2E quantizer (:mod:`anipaint.engine.compile.int8_graph`). Needs photos to
               calibrate (:func:`anipaint.engine.compile.int8.photos`)
``onnxruntime`` AnimeGANv2 exported to ONNX (float32) and run by ONNX Runtime with all graph optimisations;
               imported graphs exported through ``torch.export`` (symbolic H/W, as ``compiled``)
``strips``     AnimeGAN v1/v2 layer by layer in row strips, channels-last, bf16 convolutions where the CPU has
               them (:mod:`anipaint.engine.strips`, the same code that paints large pictures exactly);
               nothing to build. Much faster than the eager module for v1 and for the port's v2 files
=============  ==========================================================================================

Which backends apply is the architecture's row (``Architecture.backends``), and whether a build is made from the
weights (v2) or from the eager network (the rest) is its ``builds_from``. Backends that don't apply fall back to
``torch``. ``auto`` is a fast faithful backend measured once per machine (:mod:`.select`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anipaint.engine import builds
from anipaint.engine.runners import Backend, CompiledBackend, OrtBackend, StripsBackend, TorchBackend
from anipaint.models.registry import Style
from anipaint.networks.architectures import get_architecture
from anipaint.settings import Settings

log = logging.getLogger("anipaint.engine")
AUTO = "auto"
# Bump when something changes how fast the backends run relative to each other without changing a build (the
# process's allocator policy, a backend added to an architecture, say): auto measures again, the builds are kept.
MEASURE_VERSION = 4


@dataclass(frozen=True)
class Opening:
    """What opening a backend is given: the style's eager network, and the build's file when it has one."""

    style: Style
    settings: Settings
    network: Any
    path: Path | None

    @property
    def multiple(self) -> int | None:
        """The size multiple a network-made build pads to; None: the v2 graph's own padding."""
        return None if _from_weights(self.style) else self.network.size_multiple


@dataclass(frozen=True)
class BackendKind:
    """One row of :data:`BACKENDS`."""

    name: str
    open: Callable[[Opening], Backend]
    suffix: str | None = None  # the build's file type; None: nothing to build
    from_weights: Callable[[Path, Path, Settings], None] | None = None  # (artefact, out, settings): v2's recipe
    # (network, out, settings, the face model's paint_shape or None): everyone else's
    from_network: Callable[[Any, Path, Settings, tuple[int, int] | None], None] | None = None
    needs: str = ""  # what it asks of the CPU
    # Quantised: its error varies more from photo to photo than rounding's, so auto takes it only with no pixel far
    # off on the check photos (v3-shinkai's int8: 0.008 % there, 0.016 % on a photo auto had not seen).
    no_far_pixels: bool = False

    def recipe(self, style: Style, artefact: Path, settings: Settings, network: Any) -> Callable[[Path], None]:
        if _from_weights(style):
            make_from_weights = self.from_weights
            assert make_from_weights is not None, (self.name, style.id)
            return lambda out: make_from_weights(artefact, out, settings)
        make_from_network = self.from_network
        assert make_from_network is not None, (self.name, style.id)
        return lambda out: make_from_network(network, out, settings, style.paint_shape)


def _from_weights(style: Style) -> bool:
    return get_architecture(style.architecture).builds_from == "weights"


def _open_compiled(name: str) -> Callable[[Opening], Backend]:
    def open_package(o: Opening) -> Backend:
        assert o.path is not None
        return CompiledBackend(o.path, name, o.settings.jobs, o.multiple, TorchBackend(o.network))

    return open_package


def _open_onnx(o: Opening) -> Backend:
    assert o.path is not None
    return OrtBackend(o.path, o.multiple, TorchBackend(o.network))  # the fallback: sizes a fixed build doesn't take


BACKENDS: dict[str, BackendKind] = {
    kind.name: kind
    for kind in (
        BackendKind("torch", lambda o: TorchBackend(o.network)),
        BackendKind("compiled", _open_compiled("compiled"), ".pt2",
                    lambda artefact, out, s: builds.v2_package(artefact, out, s, int8=False), builds.network_package,
                    needs="bf16 convolutions where the CPU has them natively (AVX512_BF16, AMX), float32 elsewhere"),
        BackendKind("int8", _open_compiled("int8"), ".pt2",
                    lambda artefact, out, s: builds.v2_package(artefact, out, s, int8=True),
                    builds.network_int8_package, needs="int8 dot products (AVX512_VNNI, AVX-VNNI, AMX) to pay",
                    no_far_pixels=True),
        BackendKind("onnxruntime", _open_onnx, ".onnx", lambda artefact, out, s: builds.v2_onnx(artefact, out),
                    lambda network, out, s, shape: builds.network_onnx(network, out, shape)),
        BackendKind("strips", lambda o: StripsBackend(o.network, o.style.architecture, o.settings.scratch_dir),
                    needs="bf16 convolutions where the CPU has them natively, float32 elsewhere"),
    )
}
NAMES = tuple(BACKENDS)
# The eager network: first in every architecture's row, the reference every other backend is checked against, and
# what paints when nothing faster is built or faithful.
PLAIN = TorchBackend.name
# The backend whose build is a portable ONNX graph (what the browser paints with).
PORTABLE = OrtBackend.name


def applicable(style: Style) -> tuple[str, ...]:
    """Backends that can run this style here, plain first (its architecture's row). A face model has no int8: on
    aligned faces the JP face model's int8 build was 38.8-42.4 dB from its eager network with 0.08-0.18 % of the
    pixels far off (eyes and lips), while auto's square check crops passed it; a one-layer-at-a-time sweep found
    only five small layers that leave no pixel far off, and that build was no faster (docs/benchmarks.md)."""
    names = get_architecture(style.architecture).backends
    return tuple(n for n in names if n != "int8") if style.paints_faces_only else names


def wanted(settings: Settings, override: str | None = None) -> str:
    """The backend asked for (``override``, else the settings'): ``auto`` or a name of :data:`BACKENDS`."""
    name = (override or settings.backend or AUTO).lower()
    if name not in BACKENDS and name != AUTO:
        raise ValueError(f"unknown backend {name!r}; expected {AUTO} or one of {', '.join(NAMES)}")
    return name


def build_path(name: str, style: Style, settings: Settings, key: str) -> Path:
    suffix = BACKENDS[name].suffix
    assert suffix is not None, f"{name} has nothing to build"
    return builds.build_file(name, suffix, style, settings, key)


def auto_path(style: Style, settings: Settings, key: str) -> Path:
    return builds.cache_dir(style, settings) / f"auto-{key}{builds.shape_tag(style)}-m{MEASURE_VERSION}.json"


def read_auto(style: Style, settings: Settings, key: str) -> dict | None:
    try:
        return json.loads(auto_path(style, settings, key).read_text())
    except (OSError, ValueError):
        return None


def planned(style: Style, settings: Settings, key: str, name: str = AUTO) -> str | None:
    """The backend that paints the style with what this machine has built now: ``name`` (``auto``: the measured
    choice), ``torch`` where it does not apply, None while it still has to be built (``auto``: or measured)."""
    if len(applicable(style)) == 1:
        return "torch"
    if name == AUTO:
        name = (read_auto(style, settings, key) or {}).get("choice")
        if not name:
            return None
    if name not in applicable(style):
        return "torch"
    if BACKENDS[name].suffix is None:
        return name
    return name if build_path(name, style, settings, key).is_file() else None


def open_named(name: str, style: Style, artefact: Path, settings: Settings, network, key: str | None = None) -> Backend:
    """Backend ``name`` for a style (built if needed); ``torch`` when ``name`` doesn't apply to the style."""
    kind = BACKENDS[name if name in applicable(style) else "torch"]
    path = None
    if kind.suffix is not None:
        where = build_path(kind.name, style, settings, key or builds.engine_key(artefact))
        path = builds.ensure_built(kind.name, where, kind.recipe(style, artefact, settings, network))
    return kind.open(Opening(style, settings, network, path))


def open_backend(style: Style, artefact: Path, settings: Settings, network, name: str | None = None) -> Backend:
    """The backend the settings ask for (``name`` overrides them).

    ``auto`` uses the choice measured on this machine by :func:`anipaint.engine.build_backends` (``anipaint models
    prepare``), cached next to the weights. Without one it runs the plain network rather than spending a
    minute building and measuring in the middle of a request; naming a backend builds it on first use.
    """
    name = wanted(settings, name)
    if len(applicable(style)) == 1:
        return TorchBackend(network)
    key = builds.engine_key(artefact)
    if name != AUTO:
        return open_named(name, style, artefact, settings, network, key)
    # not measured yet, or its build was removed since: don't build mid-request
    choice = planned(style, settings, key) or "torch"
    try:
        return open_named(choice, style, artefact, settings, network, key)
    except (OSError, RuntimeError) as exc:  # e.g. no disk left to unpack a compiled package: paint all the same
        log.warning("%s: the %s engine did not load (%s); painting with the plain network", style.id, choice, exc)
        return TorchBackend(network)
