"""Pictures to network tensors and back: RGB uint8 (H, W, 3) ↔ float (1, 3, H, W) in [-1, 1]."""

from __future__ import annotations

import numpy as np
import torch


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """RGB uint8 (H, W, 3) → float32 (1, 3, H, W) in [-1, 1]."""
    t = torch.from_numpy(np.require(rgb, requirements=["C", "W"])).permute(2, 0, 1).unsqueeze(0).float()
    return t.div_(127.5).sub_(1.0)


def from_tensor(t: torch.Tensor) -> np.ndarray:
    """float (1, 3, H, W) in [-1, 1] → RGB uint8 (H, W, 3)."""
    out = t.squeeze(0).clamp(-1.0, 1.0).add(1.0).mul(127.5).round()
    return out.permute(1, 2, 0).to(torch.uint8).numpy()


def batch_to_tensor(rgbs: np.ndarray) -> torch.Tensor:
    """RGB uint8 (N, H, W, 3) → float32 (N, 3, H, W) in [-1, 1]."""
    t = torch.from_numpy(np.require(rgbs, requirements=["C", "W"])).permute(0, 3, 1, 2).float()
    return t.div_(127.5).sub_(1.0)


def batch_from_tensor(t: torch.Tensor) -> np.ndarray:
    """float (N, 3, H, W) in [-1, 1] → RGB uint8 (N, H, W, 3)."""
    out = t.clamp(-1.0, 1.0).add(1.0).mul(127.5).round()
    return out.permute(0, 2, 3, 1).to(torch.uint8).numpy()


def from_tensor_float(t: torch.Tensor) -> np.ndarray:
    """float (1, 3, H, W) in [-1, 1] → float32 (H, W, 3) in [0, 255], unrounded (for blending tiles)."""
    out = t.squeeze(0).float().clamp(-1.0, 1.0).add(1.0).mul(127.5)
    return np.ascontiguousarray(out.permute(1, 2, 0).numpy())
