"""``backend = auto``: measure every applicable backend once on this machine and keep the fastest good one.

"Good" means its output is within :data:`PSNR_BAR` dB of the reference eager float32 network on real photos
(:func:`anipaint.engine.int8.photos`; a synthetic picture where the machine has none). The choice and the
measurements are cached next to the builds as ``auto-<key>.json``, so later processes only read a file.
"""

from __future__ import annotations

import json
import os
import time
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
# A style whose reference paints the 512 px check picture slower than this (AnimeGAN v1 on two AVX2 cores:
# ~4.5 s) is checked and timed on the 320 px picture only, so that measuring it stays within seconds.
SLOW_PICTURE = 2.0


def reference_for(style: Style, artefact: Path, network):
    """The yardstick: the architecture's own reference (plain-call fp32 for v2), else its eager network."""
    make = get_architecture(style.architecture).reference
    return make(artefact, network) if make else backends.TorchBackend(network)


def evaluate(backend, wanted: list[np.ndarray], pictures: list[torch.Tensor], repeats: int = 3,
             give_up: float | None = None) -> dict:
    """Seconds per picture of ``pictures[-1]`` (median of clean samples) and the worst PSNR against the
    reference's pictures ``wanted`` (uint8, one per input picture).

    The PSNR calls come first and double as warm-up (first-call allocations, oneDNN kernel selection). A
    backend slower than ``give_up`` seconds is not timed further: after a sample, or already after a warm-up
    call (scaled by the pictures' areas) slower than twice that, since warm-up calls run slow themselves."""
    worst = float("inf")
    for i, (want, x) in enumerate(zip(wanted, pictures, strict=True)):
        t0 = time.perf_counter()
        got = from_tensor(backend(x))
        seconds = (time.perf_counter() - t0) * _area(pictures[-1]) / _area(x)
        worst = min(worst, psnr(want, got))
        if give_up is not None and seconds > 2 * give_up:
            return {"seconds": round(seconds, 4), "psnr": round(worst, 2), "samples": 0,
                    "note": f"stopped after picture {i + 1}: slower than {give_up:.2f} s"}
    t = timing.measure(lambda: backend(pictures[-1]), repeats=repeats, max_tries=repeats + 2, give_up=give_up)
    return {"seconds": round(t.seconds, 4), "psnr": round(worst, 2) if worst != float("inf") else 99.0,
            "clean_samples": t.clean, "samples": len(t.samples)}


def _area(x: torch.Tensor) -> int:
    return int(x.shape[-1] * x.shape[-2])


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


def check_pictures(settings: Settings, face_crops: bool = False) -> list[torch.Tensor]:
    """A small photo (320 px: another size and aspect, cheap) then the 512 px one the timings use.

    ``face_crops``: two square 512 px pictures instead, the only size a face style is painted at (portrait
    mode's aligned crops), which is also the one size some of their builds run at."""
    from anipaint.engine.int8 import photos, synthetic_photo

    if face_crops:
        squares = [_square(p, 512) for p in photos(settings, "check", side=512)[:2]]
        return (squares + [synthetic_photo(512, seed=1), synthetic_photo(512)])[:2]
    small, large = photos(settings, "check", side=320)[1:2], photos(settings, "check", side=512)[:1]
    return (small or [synthetic_photo(320, seed=1)]) + (large or [synthetic_photo(512)])


def _square(x: torch.Tensor, side: int) -> torch.Tensor:
    h, w = x.shape[-2:]
    n = min(h, w)
    top, left = (h - n) // 2, (w - n) // 2
    crop = x[..., top:top + n, left:left + n]
    return torch.nn.functional.interpolate(crop, size=(side, side), mode="bilinear", antialias=True,
                                           align_corners=False).clamp(-1, 1)


def measure_all(style: Style, artefact: Path, settings: Settings, network, key: str,
                names: tuple[str, ...] | None = None) -> dict:
    """Build and time every backend; the one record :func:`choose` caches.

    Kept short (seconds, builds aside): the reference runs once per picture; where the reference is the
    style's own eager network (every style but v2) its call on the timed picture is also the ``torch``
    timing, else ``torch`` is timed first; every other backend stops early once clearly slower than the best
    so far (:func:`evaluate`). A slow style is checked and timed on the small picture only (SLOW_PICTURE)."""

    results: dict[str, dict] = {}
    opened: dict[str, backends.Backend] = {}
    t0 = time.perf_counter()
    # Every build first: a backend timed right after a build (compiler workers winding down, a freshly
    # touched heap) measured up to 1.5x slow.
    for name in names or backends.applicable(style):
        if name == "torch":
            continue
        try:
            opened[name] = backends.open_named(name, style, artefact, settings, network, key)
        except Exception as exc:  # noqa: BLE001 - a backend that can't build here is simply not chosen
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    build_seconds = time.perf_counter() - t0

    started = time.perf_counter()
    pictures = check_pictures(settings, face_crops=style.kind == "face")
    reference = reference_for(style, artefact, network)
    t0 = time.perf_counter()
    wanted = [from_tensor(reference(pictures[0]))]
    reference_seconds = time.perf_counter() - t0
    if reference_seconds * _area(pictures[-1]) / _area(pictures[0]) > SLOW_PICTURE and style.kind != "face":
        pictures = pictures[:1]  # checked and timed on the small picture alone (see SLOW_PICTURE)
    else:
        t0 = time.perf_counter()
        wanted += [from_tensor(reference(x)) for x in pictures[1:]]
        reference_seconds = time.perf_counter() - t0
    timed = tuple(pictures[-1].shape[-2:])
    best = float("inf")
    if isinstance(reference, backends.TorchBackend):  # see reference_for
        results["torch"] = {"seconds": round(reference_seconds, 4), "psnr": 99.0, "samples": 1,
                            "note": "timed while painting the reference picture"}
        best = reference_seconds
    elif "torch" in (names or backends.applicable(style)):
        opened = {"torch": backends.TorchBackend(network), **opened}  # timed first: it sets the bar
    for name, backend in opened.items():
        try:
            results[name] = evaluate(backend, wanted, pictures, give_up=1.3 * best if best < float("inf") else None)
            if results[name]["psnr"] >= PSNR_BAR:
                best = min(best, results[name]["seconds"])
        except Exception as exc:  # noqa: BLE001 - a backend that fails on a real photo is not chosen
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    good = {n: r for n, r in results.items() if "seconds" in r and r["psnr"] >= PSNR_BAR}
    choice = min(good, key=lambda n: good[n]["seconds"]) if good else "torch"
    return {"choice": choice, "key": key, "psnr_bar": PSNR_BAR, "threads": torch.get_num_threads(),
            "timed_at": timed, "cpu_flags": list(cpu_flags()), "results": results,
            "measure_seconds": round(time.perf_counter() - started, 1),
            "build_seconds": round(build_seconds, 1)}
