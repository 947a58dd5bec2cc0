"""State dicts from the PyTorch port (bryandlee/animegan2-pytorch ``weights/*.pt``) -> the model store.

The port's files are plain ``torch.save(state_dict)`` files whose keys are
:class:`~anipaint.networks.animeganv2.Generator`'s, so conversion is validation: load with
``weights_only=True`` (no pickled code runs), require a strict key and shape match, and write the state dict
back out as ``model.pt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from anipaint.errors import ModelImportError
from anipaint.networks.animeganv2 import Generator


class PortStateDictError(ModelImportError):
    """The file is not an AnimeGANv2 state dict with the PyTorch port's keys and shapes."""


def _describe(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > limit else "")


def load_port_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """Read and validate a port ``.pt``; returns the state dict as loaded into a fresh Generator."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, or pickled objects weights_only refuses
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PortStateDictError(f"{path}: not a loadable PyTorch state dict ({reason})") from exc
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise PortStateDictError(f"{path}: expected a dict of tensors (a state dict), got {type(data).__name__}")

    model = Generator()
    expected = model.state_dict()
    missing = [k for k in expected if k not in data]
    unexpected = [k for k in data if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys: {_describe(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_describe(unexpected)}")
        raise PortStateDictError(
            f"{path}: not an AnimeGANv2 generator state dict in the PyTorch port's layout; " + "; ".join(parts)
        )
    wrong = [f"{k} {tuple(data[k].shape)} (expected {tuple(v.shape)})"
             for k, v in expected.items() if data[k].shape != v.shape]
    if wrong:
        raise PortStateDictError(f"{path}: tensor shapes do not match AnimeGANv2: {_describe(wrong)}")
    bad = [k for k, v in data.items() if not torch.isfinite(v).all()]
    if bad:
        raise PortStateDictError(f"{path}: non-finite values in {_describe(bad)}")

    model.load_state_dict({k: v.float() for k, v in data.items()}, strict=True)
    return model.state_dict()


def convert(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """Validate the port's state dict (``sources[0]``) and store it as ``out_dir/model.pt``."""
    state = load_port_state_dict(Path(sources[0]))
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(state, out_dir / "model.pt")
    return {
        "parameters": int(sum(v.numel() for v in state.values())),
        "source_format": "pytorch state dict (bryandlee/animegan2-pytorch)",
        "notes": "Runs with TF1 bilinear upsampling (as the original AnimeGANv2); the port's own forward "
                 "upsamples with align_corners=True by default, which shifts results slightly.",
    }
