"""The strip executor: a network run layer by layer over row strips, each layer's output in a temporary file.

:class:`StripNetwork` holds the weights and the building blocks (a strided, padded, possibly depthwise
convolution over strips; a norm applied on read with the whole layer's statistics; a residual sum written as its
own layer) and ``paint`` around a subclass's ``body``, which says how the network's layers connect
(:mod:`.networks` for AnimeGAN v1 and v2). Per-paint state is thread-local: one engine serves concurrent jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.compile.precision import fast_conv_dtype
from anipaint.engine.strips.row_sources import Activation, PictureSource, Source, reflect
from anipaint.engine.strips.scratch import scratch_folder
from anipaint.networks.animeganv2 import LAYER_NORM_EPS, MIN_SIZE, SIZE_MULTIPLE
from anipaint.networks.padding import alignment_padding

STRIP_BYTES = 4 << 20  # float32 input rows per strip: small strips stay in cache (2048²: 9.3 s at 4 MB, 21 s at 48)
MIN_STRIP_ROWS = 8  # but not so few that a 7x7 kernel's 6 extra rows dominate

Progress = Callable[[float], None]


def default_dtype() -> torch.dtype:
    """bfloat16 convolutions where the CPU multiplies bf16 natively (2.2x fp32 here), else float32."""
    return fast_conv_dtype()


def strip_rows(source: Source, stride: int) -> int:
    """Output rows per strip so that one strip's input is about ``STRIP_BYTES`` of float32."""
    per_row = source.width * source.channels * 4 * stride
    return max(MIN_STRIP_ROWS, STRIP_BYTES // max(1, per_row))


@dataclass
class _Run:
    """One paint's own state (several threads may paint with the same network at once)."""

    folder: Path
    progress: Progress | None
    layers_done: int = 0
    sums_done: int = 0


class StripNetwork:
    """The machinery: layers over row strips into temporary files, and ``paint`` around a network's ``body``.

    ``state_dict`` has the network module's key names; subclasses say how its layers connect.
    """

    eps = LAYER_NORM_EPS
    per_channel = False  # instance norm (v1) rather than layer norm (v2)
    layers = 1  # conv layers ``body`` runs, for progress

    def __init__(self, state_dict: dict[str, Tensor], dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        self.dtype = dtype or default_dtype()
        self.folder = folder
        self.params: dict[str, Tensor] = {}
        for key, value in state_dict.items():
            value = value.detach().float()
            if value.dim() == 4:  # convolution weights: compute dtype, channels-last
                value = value.to(self.dtype).contiguous(memory_format=torch.channels_last)
            self.params[key] = value
        self._local = threading.local()  # one engine serves concurrent jobs: each paint keeps its own state

    @property
    def _run(self) -> _Run:
        run = getattr(self._local, "run", None)
        if run is None:
            raise RuntimeError("layers run inside paint()")
        return run

    # ---- building blocks used by ``body`` --------------------------------------------------------------

    def conv(self, source: Source, weight: str, pad: tuple[int, int, int, int] = (0, 0, 0, 0), stride: int = 1,
             bias: str | None = None, pointwise: str | None = None) -> Activation:
        """A (reflect-padded, strided, possibly depthwise) convolution, optionally followed by a 1x1 one."""
        w = self.params[weight]
        b = self.params[bias].to(self.dtype) if bias and bias in self.params else None
        pw = self.params[pointwise] if pointwise else None
        left, right, top, bottom = pad
        k_h, k_w = w.shape[-2:]
        out_h = (source.height + top + bottom - k_h) // stride + 1
        out_w = (source.width + left + right - k_w) // stride + 1
        groups = source.channels if w.shape[1] == 1 and source.channels > 1 else 1
        out_c = (pw if pw is not None else w).shape[0]
        run = self._run
        run.layers_done += 1
        out = Activation(run.folder, f"{run.layers_done:03d}-{weight}", out_h, out_w, out_c)
        step = strip_rows(source, stride)
        for row0 in range(0, out_h, step):
            row1 = min(out_h, row0 + step)
            padded = np.arange(row0 * stride, (row1 - 1) * stride + k_h)  # rows of the padded input
            x = source.rows(reflect(padded - top, source.height), left, right).to(self.dtype)
            with torch.inference_mode():
                y = F.conv2d(x, w, b, stride=stride, groups=groups)
                if pw is not None:
                    y = F.conv2d(y, pw)
                out.write(row0, y)
        if run.progress is not None:
            run.progress(min(1.0, run.layers_done / (self.layers + 1)))
        return out

    def normed(self, out: Activation, norm: str, act: bool = True, eps: float | None = None) -> Activation:
        """``out`` with its norm (``<norm>.weight``/``.bias``) and LeakyReLU applied on every later read."""
        out.normalise(self.params[f"{norm}.weight"], self.params[f"{norm}.bias"], self.eps if eps is None else eps,
                      act, self.per_channel)
        return out

    def written_sum(self, a: Source, b: Source) -> Activation:
        """``a + b`` written as a layer (a residual sum is read by several later layers); releases both."""
        run = self._run
        run.sums_done += 1
        out = Activation(run.folder, f"sum-{run.sums_done:03d}", b.height, b.width, b.channels)
        step = strip_rows(b, 1)
        for row0 in range(0, b.height, step):
            index = np.arange(row0, min(b.height, row0 + step))
            out.write(row0, a.rows(index).add_(b.rows(index)))
        a.release()
        b.release()
        return out

    # ---- the whole picture --------------------------------------------------------------------------------

    def body(self, picture: Source) -> Source:
        """The network from the padded picture to the input of its 1x1 output conv (normalised on read)."""
        raise NotImplementedError

    head = "out_layer.0.weight"

    def paint(self, rgb: np.ndarray, progress: Progress | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) → painted RGB uint8, the same pixels one untiled pass would give."""
        height, width = rgb.shape[:2]
        if min(height, width) < MIN_SIZE:
            raise ValueError(f"input {height}x{width} is too small; the network needs at least {MIN_SIZE} pixels")
        pad_h, pad_w = alignment_padding(height, width, SIZE_MULTIPLE)
        padded = np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect") if pad_h or pad_w else rgb
        scratch = scratch_folder(self.folder)
        with scratch as tmp:
            self._local.run = _Run(Path(tmp), progress)
            try:
                features = self.body(PictureSource(padded))
                result = self._head(features, height, width)
                features.release()
            finally:
                self._local.run = None
        if progress is not None:
            progress(1.0)
        return result

    def _head(self, source: Source, height: int, width: int) -> np.ndarray:
        """The 1x1 output conv and tanh, straight into uint8 rows (cropped back to the picture's size)."""
        out = np.empty((height, width, 3), np.uint8)
        weight = self.params[self.head]
        step = strip_rows(source, 1)
        for row0 in range(0, height, step):
            row1 = min(height, row0 + step)
            with torch.inference_mode():
                y = torch.tanh(F.conv2d(source.rows(np.arange(row0, row1)).to(self.dtype), weight).float())
            y = y[0, :, :, :width].add(1.0).mul(127.5).round().clamp(0, 255)
            out[row0:row1] = y.permute(1, 2, 0).to(torch.uint8).numpy()
        return out


