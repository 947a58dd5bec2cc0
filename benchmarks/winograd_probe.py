"""Would Winograd convolutions make the fp32 graphs faster? One 3x3 layer, direct against Winograd F(4x4, 3x3).

``python benchmarks/winograd_probe.py [--rounds 5]``

On CPUs without native bf16 the default v3 styles spend ~76 % of their 59 GFLOP (512 px) in nine dense 3x3
stride-1 convolutions, and v1 63 % of its 248 GFLOP. Winograd F(4x4, 3x3) does those with 4x fewer multiplies:
each 6x6 input tile is transformed (B^T d B), 36 batched matrix products with the transformed weights
(G g G^T) replace the convolution, and each product tile is transformed back (A^T m A). The transforms are
written as sums of strided slices so that Inductor fuses each into one loop. The layers are the shapes the v3
and v1 graphs run at 512 px; the direct convolution is oneDNN's, channels-last, as the compiled engine runs it.
Prints each layer's time both ways, the direct convolution's GFLOP/s and Winograd's largest error relative to
the layer's largest output.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

# Lavin & Gray's F(4x4, 3x3) at the points 0, ±1, ±2 and infinity.
BT = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
      (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))
G = ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
     (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1))
AT = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))
# (input NCHW, output channels): v1's residual layers, then v3's heaviest ones
LAYERS = (((1, 256, 130, 130), 256), ((1, 128, 258, 258), 128), ((1, 128, 130, 130), 128),
          ((1, 64, 514, 514), 64))


def combine(rows: tuple[tuple[float, ...], ...], terms: list[Tensor]) -> list[Tensor]:
    """``rows @ terms`` for a small constant matrix, skipping zeros, as plain tensor sums Inductor can fuse."""
    out = []
    for row in rows:
        acc = None
        for c, t in zip(row, terms, strict=True):
            if c:
                t = t if c == 1 else -t if c == -1 else t * c
                acc = t if acc is None else acc + t
        out.append(acc)
    return out


def transformed_weights(w: Tensor) -> Tensor:
    """[K, C, 3, 3] → [36, K, C]: G g G^T for every filter."""
    g = torch.tensor(G, dtype=w.dtype)
    return torch.einsum("ij,kcjl,ml->imkc", g, w, g).reshape(36, w.shape[0], w.shape[1]).contiguous()


def winograd_conv(x: Tensor, u: Tensor) -> Tensor:
    """A valid (unpadded) 3x3 stride-1 convolution of one NCHW picture with weights from transformed_weights."""
    _, c, h, w = x.shape
    ho, wo = h - 2, w - 2
    th, tw = -(-ho // 4), -(-wo // 4)
    tiles = F.pad(x, (0, 4 * tw + 2 - w, 0, 4 * th + 2 - h))[0].unfold(1, 6, 4).unfold(2, 6, 4)  # c,th,tw,6,6
    right = combine(BT, [tiles[..., k] for k in range(6)])  # d B, one tensor per output column
    v = torch.stack([t for col in right for t in combine(BT, [col[..., j] for j in range(6)])])
    v = v.reshape(6, 6, c, th * tw).transpose(0, 1).reshape(36, c, th * tw)  # index (row, column) of B^T d B
    m = torch.bmm(u, v).reshape(6, 6, -1, th, tw)
    k = u.shape[1]
    cols = [combine(AT, [m[i, col] for i in range(6)]) for col in range(6)]  # A^T m, per column
    rows = [combine(AT, [cols[col][a] for col in range(6)]) for a in range(4)]  # (A^T m) A, per row
    y = torch.stack([torch.stack(r, -1) for r in rows], -2)  # k, th, tw, 4, 4
    return y.permute(0, 1, 3, 2, 4).reshape(1, k, 4 * th, 4 * tw)[:, :, :ho, :wo]


def best_of(fn: Callable[[], object], rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    fused = torch.compile(winograd_conv, dynamic=False)
    torch.manual_seed(0)
    with torch.inference_mode():
        for shape, k in LAYERS:
            x = torch.randn(shape)
            w = torch.randn(k, shape[1], 3, 3) / (3 * shape[1] ** 0.5)
            u = transformed_weights(w)
            direct_in = x.contiguous(memory_format=torch.channels_last)
            ref = F.conv2d(direct_in, w)
            err = ((fused(x, u) - ref).abs().max() / ref.abs().max()).item()
            direct = best_of(lambda: F.conv2d(direct_in, w), args.rounds)  # noqa: B023 - called at once
            wino = best_of(lambda: fused(x, u), args.rounds)  # noqa: B023
            gflop = 2 * k * shape[1] * 9 * (shape[2] - 2) * (shape[3] - 2) / 1e9
            print(f"{str(shape):20s} -> {k:3d} ch: direct {direct * 1e3:7.1f} ms ({gflop / direct:4.0f} GFLOP/s), "
                  f"Winograd {wino * 1e3:7.1f} ms = {direct / wino:4.2f}x direct, rel. error {err:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
