"""The AnimeGAN v1 and v2 topologies for the strip executor (:mod:`.executor`), in their modules' key names."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from anipaint.engine.strips.executor import StripNetwork
from anipaint.engine.strips.row_sources import Activation, Halved, Source, Sum, Upsampled
from anipaint.networks import animeganv1 as v1
from anipaint.networks.animeganv2 import LAYER_NORM_EPS, PLAN, PORT_NORM_EPS, RESIDUAL, UPSAMPLE, ConvSpec


class StripV2(StripNetwork):
    """AnimeGANv2 (:mod:`anipaint.networks.animeganv2` key names) layer by layer, following ``animeganv2.PLAN``.

    ``semantics`` "tf" or "port" selects the resize and the norm epsilon exactly as that module does.
    """

    layers = sum(1 for s in PLAN if isinstance(s, ConvSpec) or str(s).startswith("project:"))

    def __init__(self, state_dict: dict[str, Tensor], semantics: str = "tf", dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        super().__init__(state_dict, dtype, folder)
        self.align_corners = semantics == "port"
        self.eps = PORT_NORM_EPS if semantics == "port" else LAYER_NORM_EPS

    def body(self, picture: Source) -> Source:
        source: Source = picture
        residual: Source | None = None
        for step in PLAN:
            if step == RESIDUAL:
                residual = source
            elif step == UPSAMPLE:
                source = Upsampled(source, self.align_corners)
            elif isinstance(step, str):  # "project:<prefix>": 1x1 conv, norm without activation, residual
                prefix = step.split(":", 1)[1]
                out = self.normed(self.conv(source, f"{prefix}.layers.2.weight"), f"{prefix}.layers.3", act=False)
                if source is not residual:
                    source.release()
                if residual is not None and residual.channels == out.channels:
                    source = self.written_sum(residual, out)
                else:
                    if residual is not None:
                        residual.release()
                    source = out
                residual = None
            else:
                out = self.conv(source, f"{step.prefix}.1.weight", step.pad, step.stride, bias=f"{step.prefix}.1.bias")
                if source is not residual:
                    source.release()
                source = self.normed(out, f"{step.prefix}.2")
        return source


class StripV1(StripNetwork):
    """AnimeGAN v1 (:mod:`anipaint.networks.animeganv1` key names) layer by layer, instance norms."""

    per_channel = True
    eps = v1.NORM_EPS
    layers = 4 + 4 + 1 + 8 * 3 + 1 + 3 + 3  # b1, b2, m.conv_in, eight residual blocks, m.conv_out, u2, u1
    head = "out.weight"

    def _cnl(self, source: Source, prefix: str) -> Activation:
        """``ConvNormLReLU``: reflect pad k//2, conv, instance norm (eps 1e-5), LeakyReLU; releases ``source``."""
        k = self.params[f"{prefix}.conv.weight"].shape[-1]
        out = self.normed(self.conv(source, f"{prefix}.conv.weight", (k // 2,) * 4), f"{prefix}.norm")
        source.release()
        return out

    def _sep(self, source: Source, prefix: str, stride: int = 1, release: bool = True) -> Activation:
        """``SeparableConv``: depthwise 3x3 + pointwise 1x1, instance norm (eps 1e-6), LeakyReLU."""
        pad = (0, 1, 0, 1) if stride == 2 else (1, 1, 1, 1)
        out = self.conv(source, f"{prefix}.depthwise.weight", pad, stride, pointwise=f"{prefix}.pointwise.weight")
        if release:
            source.release()
        return self.normed(out, f"{prefix}.norm", eps=v1.SEPARABLE_NORM_EPS)

    def _down(self, source: Source, prefix: str) -> Source:
        strided = self._sep(source, f"{prefix}.strided", stride=2, release=False)
        resized = self._sep(Halved(source), f"{prefix}.resized")  # releases ``source`` too
        return Sum(strided, resized)

    def body(self, picture: Source) -> Source:
        x = self._down(self._cnl(self._cnl(picture, "b1.conv1"), "b1.conv2"), "b1.down")
        x = self._down(self._sep(self._cnl(x, "b2.conv"), "b2.sep"), "b2.down")
        x = self._cnl(x, "m.conv_in")
        for i in range(8):
            p = f"m.res.{i}"
            y = self.normed(self.conv(x, f"{p}.expand.conv.weight"), f"{p}.expand.norm")
            dw = self.normed(self.conv(y, f"{p}.depthwise.weight", (1, 1, 1, 1)), f"{p}.norm1")
            y.release()
            projected = self.normed(self.conv(dw, f"{p}.project.weight"), f"{p}.norm2", act=False)
            dw.release()
            x = self.written_sum(x, projected)
        x = self._cnl(x, "m.conv_out")
        x = self._cnl(self._sep(self._sep(Upsampled(x), "u2.sep1"), "u2.sep2"), "u2.conv")
        return self._cnl(self._cnl(self._sep(Upsampled(x), "u1.sep"), "u1.conv1"), "u1.conv2")
