"""The AnimeGANv2 generator in PyTorch.

Module and parameter names are exactly those of the widely used PyTorch port (bryandlee/animegan2-pytorch,
``model.py``), so a state dict saved by that port loads here with ``strict=True``. Semantics follow the official
TensorFlow graph (checked op by op in the TFLite export, see :mod:`anipaint.importers.tflite`), where the port
differs:

* upsampling is TF1 ``resize_bilinear(align_corners=False, half_pixel_centers=False)`` to exactly 2x: source
  coordinate ``dst * in / out`` with no half-pixel offset. The port instead resizes with ``align_corners=True``
  to the encoder's sizes, or (option) with PyTorch's half-pixel mode; neither is what TF computes;
* the layer norm normalises over H, W and C per image, then applies a per-channel scale and offset, which is
  ``GroupNorm(1, C)``, with TF's epsilon 1e-12 (the ``batchnorm/add/y`` constant in the graph) instead of
  PyTorch's default 1e-5;
* any input size: the input is reflect-padded up to a multiple of 4 (the two stride-2 convolutions) and the
  output is cropped back, so TF's "2x" upsampling lands exactly on the encoder's sizes.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from anipaint.networks.graph_ops import resize_bilinear

LAYER_NORM_EPS = 1e-12  # tf.contrib.layers.layer_norm's epsilon, as stored in the graph (127 * 7.874e-15)
SIZE_MULTIPLE = 4  # two stride-2 convolutions
MIN_SIZE = 8  # below this the 1-pixel reflection pads at 1/4 scale have nothing to reflect


def resize_bilinear_tf1(x: Tensor, size: tuple[int, int]) -> Tensor:
    """TF1 ``resize_bilinear`` with ``align_corners=False, half_pixel_centers=False`` on an NCHW tensor.

    Source coordinate ``src = dst * in / out`` (no half-pixel offset). ``F.interpolate(align_corners=False)``
    is the half-pixel mode and samples differently; the one TF-exact implementation lives with the graph ops.
    """
    return resize_bilinear(x, size)


def pad_input(x: Tensor) -> Tensor:
    """Check the size and reflect-pad bottom/right to a multiple of 4 (crop the output back to the input's size).

    With the padding each 2x upsample restores the encoder's size exactly, as in TF at its native sizes;
    reflect keeps the border statistics close to the picture's own.
    """
    h, w = x.shape[-2:]
    if min(h, w) < MIN_SIZE:
        raise ValueError(f"input {h}x{w} is too small; AnimeGANv2 needs at least {MIN_SIZE}x{MIN_SIZE} pixels")
    pad_h, pad_w = -h % SIZE_MULTIPLE, -w % SIZE_MULTIPLE
    return F.pad(x, (0, pad_w, 0, pad_h), mode="reflect") if pad_h or pad_w else x


class ConvNormLReLU(nn.Sequential):
    """Pad, conv, layer norm, LeakyReLU(0.2); children named 0-3 as in the port."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int = 3,
        stride: int = 1,
        padding: int | tuple[int, int, int, int] = 1,
        groups: int = 1,
        bias: bool = False,
    ) -> None:
        super().__init__(
            nn.ReflectionPad2d(padding),
            nn.Conv2d(in_ch, out_ch, kernel_size=kernel_size, stride=stride, padding=0, groups=groups, bias=bias),
            nn.GroupNorm(num_groups=1, num_channels=out_ch, eps=LAYER_NORM_EPS, affine=True),
            nn.LeakyReLU(0.2),
        )


class InvertedResBlock(nn.Module):
    """1x1 expand, 3x3 depthwise (with bias), 1x1 project + norm; residual when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, expansion_ratio: int = 2) -> None:
        super().__init__()
        self.use_res_connect = in_ch == out_ch
        bottleneck = int(round(in_ch * expansion_ratio))
        layers: list[nn.Module] = []
        if expansion_ratio != 1:
            layers.append(ConvNormLReLU(in_ch, bottleneck, kernel_size=1, padding=0))
        layers.append(ConvNormLReLU(bottleneck, bottleneck, groups=bottleneck, bias=True))
        layers.append(nn.Conv2d(bottleneck, out_ch, kernel_size=1, padding=0, bias=False))
        layers.append(nn.GroupNorm(num_groups=1, num_channels=out_ch, eps=LAYER_NORM_EPS, affine=True))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.layers(x)
        return x + out if self.use_res_connect else out


class Generator(nn.Module):
    """AnimeGANv2 generator: ``[N, 3, H, W]`` RGB in [-1, 1] -> same shape in [-1, 1], any H, W >= 8.

    ``semantics="tf"`` (default) computes what the official TensorFlow graph computes, for weights converted
    from it. ``semantics="port"`` computes what the PyTorch port computes (``align_corners=True`` resizes to the
    encoder's sizes, GroupNorm eps 1e-5), for the port's own trained ``.pt`` files, which learnt with that.
    """

    def __init__(self, semantics: str = "tf") -> None:
        super().__init__()
        if semantics not in ("tf", "port"):
            raise ValueError(f"semantics must be 'tf' or 'port', not {semantics!r}")
        self.semantics = semantics
        # stride-2 convs pad (left 0, right 1, top 0, bottom 1), as TF's paddings [[0,0],[0,1],[0,1],[0,0]]
        self.block_a = nn.Sequential(
            ConvNormLReLU(3, 32, kernel_size=7, padding=3),
            ConvNormLReLU(32, 64, stride=2, padding=(0, 1, 0, 1)),
            ConvNormLReLU(64, 64),
        )
        self.block_b = nn.Sequential(
            ConvNormLReLU(64, 128, stride=2, padding=(0, 1, 0, 1)),
            ConvNormLReLU(128, 128),
        )
        self.block_c = nn.Sequential(
            ConvNormLReLU(128, 128),
            InvertedResBlock(128, 256, 2),
            InvertedResBlock(256, 256, 2),
            InvertedResBlock(256, 256, 2),
            InvertedResBlock(256, 256, 2),
            ConvNormLReLU(256, 128),
        )
        self.block_d = nn.Sequential(
            ConvNormLReLU(128, 128),
            ConvNormLReLU(128, 128),
        )
        self.block_e = nn.Sequential(
            ConvNormLReLU(128, 64),
            ConvNormLReLU(64, 64),
            ConvNormLReLU(64, 32, kernel_size=7, padding=3),
        )
        self.out_layer = nn.Sequential(
            nn.Conv2d(32, 3, kernel_size=1, stride=1, padding=0, bias=False),
            nn.Tanh(),
        )
        if semantics == "port":
            for module in self.modules():
                if isinstance(module, nn.GroupNorm):
                    module.eps = 1e-5

    def _upsample(self, x: Tensor, size: tuple[int, int]) -> Tensor:
        if self.semantics == "port":
            return F.interpolate(x, size, mode="bilinear", align_corners=True)
        return resize_bilinear_tf1(x, size)

    def forward(self, x: Tensor) -> Tensor:
        h, w = x.shape[-2:]
        x = pad_input(x)

        out = self.block_a(x)
        half_size = (out.shape[-2], out.shape[-1])
        out = self.block_b(out)
        out = self.block_c(out)
        # The TF graph resizes at the start of its scopes D and E, i.e. after block_c and after block_d; with
        # the padding above, 2x lands exactly on the encoder's sizes, which is what the port resizes to.
        out = self._upsample(out, half_size)
        out = self.block_d(out)
        out = self._upsample(out, (x.shape[-2], x.shape[-1]))
        out = self.block_e(out)
        out = self.out_layer(out)
        return out[..., :h, :w]
