"""``backend = auto``: measure every applicable backend once on this machine and keep the fastest good one.

"Good" means its output is within :data:`PSNR_BAR` dB of the reference eager float32 network on real photos
(:func:`anipaint.engine.int8.photos`; a synthetic picture where the machine has none). The choice and the
measurements are cached next to the builds as ``auto-<key>.json``, so later processes only read a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock

from anipaint.engine import backends, timing
from anipaint.engine.cpu import cpu_flags
from anipaint.engine.tensors import from_tensor
from anipaint.networks.architectures import get_architecture
from anipaint.quality import psnr
from anipaint.registry import Style
from anipaint.settings import Settings

PSNR_BAR = 35.0


def reference_for(style: Style, artefact: Path, network):
    """The yardstick: the architecture's own reference (plain-call fp32 for v2), else its eager network."""
    make = get_architecture(style.architecture).reference
    return make(artefact, network) if make else backends.TorchBackend(network)


def evaluate(backend, wanted: list[np.ndarray] | None, pictures: list[torch.Tensor], repeats: int = 3) -> dict:
    """Seconds per 512 px picture (median of clean samples) and the worst PSNR against the reference's
    pictures ``wanted`` (uint8, one per input picture; None: the backend *is* the reference)."""

    worst = float("inf")
    if wanted is not None:
        worst = min(psnr(want, from_tensor(backend(x))) for want, x in zip(wanted, pictures, strict=True))
    t = timing.measure(lambda: backend(pictures[0]), repeats=repeats)
    return {"seconds": round(t.seconds, 4), "psnr": round(worst, 2) if worst != float("inf") else 99.0,
            "clean_samples": t.clean}


def choose(style: Style, artefact: Path, settings: Settings, network, key: str | None = None,
           names: tuple[str, ...] | None = None) -> dict:
    """The cached auto choice for this machine, measuring (and building) every backend the first time."""
    key = key or backends.engine_key(artefact)
    cached = backends.read_auto(style, settings, key)
    if cached and cached.get("choice"):
        return cached
    path = backends.auto_path(style, settings, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        cached = backends.read_auto(style, settings, key)
        if cached and cached.get("choice"):
            return cached
        result = measure_all(style, artefact, settings, network, key, names)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result, indent=2))
        os.replace(tmp, path)
        return result


def measure_all(style: Style, artefact: Path, settings: Settings, network, key: str,
                names: tuple[str, ...] | None = None) -> dict:
    from anipaint.engine.int8 import photos, synthetic_photo

    pictures = photos(settings, "check", side=512)[:2] or [synthetic_photo(512)]
    reference = reference_for(style, artefact, network)
    wanted = [from_tensor(reference(x)) for x in pictures]  # once, not once per backend (v1: 4 s a picture)
    has_own_reference = get_architecture(style.architecture).reference is not None
    results: dict[str, dict] = {}
    for name in names or backends.applicable(style):
        try:
            backend = backends.open_named(name, style, artefact, settings, network, key)
            is_reference = name == "torch" and not has_own_reference  # see reference_for
            if not is_reference:  # (the reference has just run)
                backend(pictures[0])  # warm-up: first-call allocations and oneDNN kernel selection
            results[name] = evaluate(backend, None if is_reference else wanted, pictures)
        except Exception as exc:  # noqa: BLE001 - a backend that can't build here is simply not chosen
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    good = {n: r for n, r in results.items() if "seconds" in r and r["psnr"] >= PSNR_BAR}
    choice = min(good, key=lambda n: good[n]["seconds"]) if good else "torch"
    return {"choice": choice, "key": key, "psnr_bar": PSNR_BAR, "threads": torch.get_num_threads(),
            "cpu_flags": list(cpu_flags()), "results": results}
