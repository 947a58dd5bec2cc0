"""The engine backends at run time: each is a callable ``NCHW float32 in [-1, 1] → same shape`` (any H, W ≥ 8)
over one way of running a style's generator. Which exist, how each is built and opened: :mod:`.backends`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from anipaint.engine.compile.graph_program import MIN_MULTIPLES, fixed_size_of
from anipaint.engine.runtime import threads
from anipaint.engine.tensors import from_tensor, to_tensor
from anipaint.networks.animeganv2 import MIN_SIZE, SIZE_MULTIPLE
from anipaint.networks.padding import pad_to_multiple


class Backend:
    """A callable generator: NCHW float32 [-1, 1] → NCHW float32 [-1, 1], same size."""

    name = "torch"
    batches = False  # whether a call may carry several pictures (N > 1); else the caller loops

    def __call__(self, x: Tensor) -> Tensor:
        raise NotImplementedError


class TorchBackend(Backend):
    """The style's plain network (eager float32 torch module or graph module)."""

    batches = True

    def __init__(self, network: Callable[[Tensor], Tensor]) -> None:
        self.network = network

    def __call__(self, x: Tensor) -> Tensor:
        with torch.inference_mode():
            return self.network(x)


def _pad4(x: Tensor) -> tuple[Tensor, int, int]:
    h, w = x.shape[-2:]
    return pad_to_multiple(x, SIZE_MULTIPLE), h, w  # exactly as the network module pads


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
        elif min(x.shape[-2:]) < MIN_SIZE:
            raise ValueError(f"input {tuple(x.shape[-2:])} is too small; AnimeGANv2 needs at least "
                             f"{MIN_SIZE}x{MIN_SIZE} pixels")
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
    """A v1/v2 module run by :mod:`anipaint.engine.strips` (uint8 in and out, like every painted picture)."""

    name = "strips"

    def __init__(self, network, architecture: str, folder: Path | None = None) -> None:
        from anipaint.engine.strips import for_network

        strips = for_network(network, architecture, folder)
        if strips is None:
            raise ValueError(f"no strip version of {type(network).__name__}")
        self.strips = strips

    def __call__(self, x: Tensor) -> Tensor:

        # Inputs come from to_tensor(uint8) and outputs go to from_tensor, so the uint8 round trip is exact.
        return to_tensor(self.strips.paint(from_tensor(x)))


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
