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

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anipaint.networks.graph_ops import resize_bilinear
from anipaint.networks.padding import pad_to_multiple

LAYER_NORM_EPS = 1e-12  # tf.contrib.layers.layer_norm's epsilon, as stored in the graph (127 * 7.874e-15)
PORT_NORM_EPS = 1e-5  # the PyTorch port's GroupNorm default, which its own .pt files were trained with
SIZE_MULTIPLE = 4  # two stride-2 convolutions
MIN_SIZE = 8  # below this the 1-pixel reflection pads at 1/4 scale have nothing to reflect


def pad_input(x: Tensor) -> Tensor:
    """Check the size and reflect-pad bottom/right to a multiple of 4 (crop the output back to the input's size).

    With the padding each 2x upsample restores the encoder's size exactly, as in TF at its native sizes;
    reflect keeps the border statistics close to the picture's own.
    """
    h, w = x.shape[-2:]
    if min(h, w) < MIN_SIZE:
        raise ValueError(f"input {h}x{w} is too small; AnimeGANv2 needs at least {MIN_SIZE}x{MIN_SIZE} pixels")
    return pad_to_multiple(x, SIZE_MULTIPLE)


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
                    module.eps = PORT_NORM_EPS

    def _upsample(self, x: Tensor, size: tuple[int, int]) -> Tensor:
        if self.semantics == "port":
            return F.interpolate(x, size, mode="bilinear", align_corners=True)
        return resize_bilinear(x, size)  # TF1: no half-pixel offset, as the graph was trained

    def forward(self, x: Tensor) -> Tensor:
        h, w = x.shape[-2:]
        x = pad_input(x)
        # The TF graph resizes at the start of its scopes D and E (see ORDER); with the padding above, 2x lands
        # exactly on the encoder's sizes, which is what the port resizes to.
        for name in ORDER:
            if name == UPSAMPLE:
                x = self._upsample(x, (2 * x.shape[-2], 2 * x.shape[-1]))
            else:
                x = getattr(self, name)(x)
        return self.out_layer(x)[..., :h, :w]


# ---- the layer plan: the generator above as a flat list of steps --------------------------------------------
# One statement of the network (the module) drives every other way of running it: the benchmark reference below,
# the compiled export graph (anipaint.engine.compile.v2_graph) and the strip executor (anipaint.engine.strips).

UPSAMPLE = "up"  # a 2x bilinear resize between blocks
ORDER = ("block_a", "block_b", "block_c", UPSAMPLE, "block_d", UPSAMPLE, "block_e")
RESIDUAL = "ir"  # the start of an inverted residual block; its end is "project:<prefix>"


@dataclass(frozen=True)
class ConvSpec:
    """One ConvNormLReLU of the network: where its weights live and how it is padded."""

    prefix: str  # state-dict prefix: conv at .1, norm at .2
    pad: tuple[int, int, int, int]  # reflect padding (left, right, top, bottom) before the conv
    stride: int = 1


def _conv_spec(prefix: str, block: ConvNormLReLU) -> ConvSpec:
    pad = tuple(int(p) for p in block[0].padding)
    return ConvSpec(prefix, pad, int(block[1].stride[0]))  # type: ignore[arg-type]


def layer_plan(net: Generator | None = None) -> list[ConvSpec | str]:
    """The generator's steps in execution order: ConvSpec, ``RESIDUAL``, ``"project:<prefix>"`` or ``UPSAMPLE``
    (the output head, ``out_layer.0`` + tanh, follows the last step)."""
    net = net or Generator()
    plan: list[ConvSpec | str] = []
    for name in ORDER:
        if name == UPSAMPLE:
            plan.append(UPSAMPLE)
            continue
        for i, block in enumerate(getattr(net, name)):
            prefix = f"{name}.{i}"
            if isinstance(block, ConvNormLReLU):
                plan.append(_conv_spec(prefix, block))
                continue
            plan.append(RESIDUAL)
            for j, layer in enumerate(block.layers):
                if isinstance(layer, ConvNormLReLU):
                    plan.append(_conv_spec(f"{prefix}.layers.{j}", layer))
            plan.append(f"project:{prefix}")
    return plan


PLAN: list[ConvSpec | str] = layer_plan()


def reference_forward(sd: dict[str, Tensor], x: Tensor) -> Tensor:
    """The yardstick: :data:`PLAN` as plain eager fp32 ``F.*`` calls, obviously the naive float network (TF
    semantics). NCHW float32 RGB in [-1, 1] → same shape in [-1, 1]; any H, W ≥ 8."""

    def norm(x: Tensor, prefix: str) -> Tensor:
        return F.group_norm(x, 1, sd[f"{prefix}.weight"], sd[f"{prefix}.bias"], eps=LAYER_NORM_EPS)

    h, w = x.shape[-2:]
    x = pad_input(x)
    residual: Tensor | None = None
    for step in PLAN:
        if step == RESIDUAL:
            residual = x
        elif step == UPSAMPLE:
            x = resize_bilinear(x, (2 * x.shape[-2], 2 * x.shape[-1]))
        elif isinstance(step, str):  # project:<prefix>
            prefix = step.split(":", 1)[1]
            out = norm(F.conv2d(x, sd[f"{prefix}.layers.2.weight"]), f"{prefix}.layers.3")
            x = residual + out if residual is not None and residual.shape == out.shape else out
        else:
            weight = sd[f"{step.prefix}.1.weight"]
            groups = x.shape[1] if weight.shape[1] == 1 and x.shape[1] > 1 else 1
            x = F.pad(x, step.pad, mode="reflect") if any(step.pad) else x
            x = F.conv2d(x, weight, sd.get(f"{step.prefix}.1.bias"), stride=step.stride, groups=groups)
            x = F.leaky_relu(norm(x, f"{step.prefix}.2"), 0.2)
    return torch.tanh(F.conv2d(x, sd["out_layer.0.weight"]))[..., :h, :w]


class ReferenceV2:
    """Callable wrapper: ``ReferenceV2(state_dict)(x)`` under ``torch.inference_mode``."""

    def __init__(self, state_dict: dict[str, Tensor]) -> None:
        self.sd = {k: v.detach().float().contiguous() for k, v in state_dict.items()}

    def __call__(self, x: Tensor) -> Tensor:
        with torch.inference_mode():
            return reference_forward(self.sd, x)
