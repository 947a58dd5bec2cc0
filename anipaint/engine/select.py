"""``backend = auto``: measure every applicable backend once on this machine and keep a fast faithful one.

"Faithful" (:func:`anipaint.quality.faithful`) means that on every check photo (:func:`check_pictures`: a flat
sky, porcelain and a wall, skin, then the timed picture) its output has a PSNR of at least 40 dB against the
reference eager float32 network and at most 0.01 % of its pixels are more than 32 levels off. Among the
faithful backends within :data:`NEAR_FASTEST` of the fastest, the one closest to the reference wins
(:func:`pick`): a few per cent of speed, within a measurement's noise, is not worth decibels. The choice, why,
and the measurements are cached next to the builds as ``auto-<key>.json``, so later processes only read a file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from anipaint.engine import backends, builds
from anipaint.engine.runners import Backend, TorchBackend
from anipaint.engine.runtime import progress, timing
from anipaint.engine.runtime.cpu import cpu_flags
from anipaint.engine.tensors import from_tensor
from anipaint.models.registry import Style
from anipaint.networks.architectures import get_architecture
from anipaint.quality import FAITHFUL_FAR_SHARE, FAITHFUL_PSNR, faithful, far_share, psnr
from anipaint.settings import Settings

NEAR_FASTEST = 1.10  # backends this close to the fastest faithful one count as fast as it
# A style whose reference paints the 512 px check picture slower than this (AnimeGAN v1 on two AVX2 cores:
# ~4.5 s) is checked and timed on the 320 px picture only, so that measuring it stays within seconds.
SLOW_PICTURE = 2.0


def reference_for(style: Style, artefact: Path, network):
    """The yardstick: the architecture's own reference (plain-call fp32 for v2), else its eager network."""
    make = get_architecture(style.architecture).reference
    return make(artefact, network) if make else TorchBackend(network)


def evaluate(backend, wanted: list[np.ndarray], pictures: list[torch.Tensor], repeats: int = 3,
             give_up: float | None = None) -> dict:
    """Seconds per picture of ``pictures[-1]`` (median of clean samples), and the worst PSNR and worst far-off
    share against the reference's pictures ``wanted`` (uint8, one per input picture).

    The PSNR calls come first and double as warm-up (first-call allocations, oneDNN kernel selection). A
    backend slower than ``give_up`` seconds is not timed further: after a sample, or already after a warm-up
    call (scaled by the pictures' areas) slower than twice that, since warm-up calls run slow themselves, and
    slower again when called once more: one slow call can be another process's burst (a shared machine's
    record once lost v3-hayao's int8 to a 9 s first call that takes 0.09 s alone)."""
    worst, far = float("inf"), 0.0
    for i, (want, x) in enumerate(zip(wanted, pictures, strict=True)):
        t0 = time.perf_counter()
        got = from_tensor(backend(x))
        seconds = (time.perf_counter() - t0) * _area(pictures[-1]) / _area(x)
        worst, far = min(worst, psnr(want, got)), max(far, far_share(want, got))
        if give_up is not None and seconds > 2 * give_up:
            t0 = time.perf_counter()
            backend(x)
            seconds = (time.perf_counter() - t0) * _area(pictures[-1]) / _area(x)
        if give_up is not None and seconds > 2 * give_up:
            return {"seconds": round(seconds, 4), **_fidelity(worst, far), "samples": 0,
                    "note": f"stopped after picture {i + 1}: slower than {give_up:.2f} s"}
    t = timing.measure(lambda: backend(pictures[-1]), repeats=repeats, max_tries=repeats + 2, give_up=give_up)
    return {"seconds": round(t.seconds, 4), **_fidelity(worst, far), "clean_samples": t.clean,
            "samples": len(t.samples)}


def _fidelity(db: float, far: float) -> dict:
    return {"psnr": round(db, 2) if db != float("inf") else None, "far_share": far, "faithful": faithful(db, far)}


def pick(results: dict[str, dict]) -> tuple[str, str]:
    """The backend to use and why, from :func:`measure_all`'s results: the faithful backend closest to the
    reference among those within :data:`NEAR_FASTEST` of the fastest faithful one (the reference itself is
    ``torch``, closest by definition)."""
    good = {n: r for n, r in results.items() if "seconds" in r and r.get("faithful")}
    if not good:
        return backends.PLAIN, "no backend was faithful to the reference; the plain network paints"
    fastest = min(good, key=lambda n: good[n]["seconds"])
    near = [n for n in good if good[n]["seconds"] <= NEAR_FASTEST * good[fastest]["seconds"]]
    # the reference itself, and a backend whose pictures equal the reference's (PSNR recorded as None), are closest
    closeness = {n: float("inf") if good[n].get("psnr") is None else good[n]["psnr"] for n in near}
    choice = max(near, key=lambda n: (closeness[n], -good[n]["seconds"]))
    rejected = sorted(n for n, r in results.items() if "seconds" in r and not r.get("faithful"))
    why = (f"{fastest} is the fastest faithful backend ({good[fastest]['seconds']:.3f} s)" if choice == fastest
           else f"{choice} ({good[choice]['seconds']:.3f} s) is within {NEAR_FASTEST - 1:.0%} of the fastest, "
                f"{fastest} ({good[fastest]['seconds']:.3f} s), and closer to the reference")
    if rejected:
        why += f"; not faithful: {', '.join(rejected)}"
    return choice, why


def _area(x: torch.Tensor) -> int:
    return int(x.shape[-1] * x.shape[-2])


def choose(style: Style, artefact: Path, settings: Settings, network, key: str | None = None,
           names: tuple[str, ...] | None = None) -> dict:
    """The cached auto choice for this machine, measuring (and building) every backend the first time."""
    key = key or builds.engine_key(artefact)
    path = backends.auto_path(style, settings, key)

    def cached() -> dict | None:
        found = backends.read_auto(style, settings, key)
        return found if found and found.get("choice") else None

    def measured() -> dict:
        result = measure_all(style, artefact, settings, network, key, names)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result, indent=2))
        os.replace(tmp, path)
        return result

    return builds.made_once(Path(str(path) + ".lock"), cached, measured)


def check_pictures(settings: Settings, face_crop: tuple[int, int] | None = None) -> list[torch.Tensor]:
    """The packaged check photos at 320 px (a flat sky, porcelain and a wall, skin: where speckles and banding
    show), then the 512 px picture the timings use (the sample folder's first photo, else the last of those).

    ``face_crop``: two (H, W) pictures instead, the middle of 512 px squares: the only size a face model is painted
    at (its ``paint_shape`` of portrait mode's aligned crops), also the one size some of its builds run at."""
    from anipaint.engine.compile.int8 import packaged_photos, photos

    if face_crop:
        h, w = face_crop
        squares = [_square(p, 512) for p in (photos(settings, "check", side=512) + packaged_photos(512))[:2]]
        return [s[..., (512 - h) // 2:(512 - h) // 2 + h, (512 - w) // 2:(512 - w) // 2 + w] for s in squares]
    return packaged_photos(320) + (photos(settings, "check", side=512)[:1] or packaged_photos(512)[-1:])


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
    opened: dict[str, Backend] = {}
    t0 = time.perf_counter()
    # Every build first: a backend timed right after a build (compiler workers winding down, a freshly
    # touched heap) measured up to 1.5x slow.
    for name in names or backends.applicable(style):
        if name == backends.PLAIN:
            continue
        built = backends.BACKENDS[name].suffix is None or backends.build_path(name, style, settings, key).is_file()
        progress.step(style.id, f"{'opening' if built else 'building'} {name}")
        try:
            opened[name] = backends.open_named(name, style, artefact, settings, network, key)
        except Exception as exc:  # noqa: BLE001 - a backend that can't build here is simply not chosen
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    build_seconds = time.perf_counter() - t0

    started = time.perf_counter()
    progress.step(style.id, "measuring")
    pictures = check_pictures(settings, (style.paint_shape or (512, 512)) if style.paints_faces_only else None)
    reference = reference_for(style, artefact, network)
    wanted: list[np.ndarray] = []
    seconds = 0.0
    while len(wanted) < len(pictures):
        x = pictures[len(wanted)]
        t0 = time.perf_counter()
        wanted.append(from_tensor(reference(x)))
        seconds = time.perf_counter() - t0
        if len(wanted) == 1 and seconds * _area(pictures[-1]) / _area(x) > SLOW_PICTURE and not style.paints_faces_only:
            pictures = pictures[:-1]  # checked and timed on the small pictures alone (see SLOW_PICTURE)
    timed = tuple(pictures[-1].shape[-2:])
    best = float("inf")
    if isinstance(reference, TorchBackend):  # see reference_for
        results[backends.PLAIN] = {"seconds": round(seconds, 4), "reference": True, "faithful": True, "samples": 1,
                            "note": "the reference itself, timed while painting the last check picture"}
        best = seconds
    elif backends.PLAIN in (names or backends.applicable(style)):
        opened = {backends.PLAIN: TorchBackend(network), **opened}  # timed first: it sets the bar
    for name, backend in opened.items():
        try:
            results[name] = evaluate(backend, wanted, pictures, give_up=1.3 * best if best < float("inf") else None)
            kind = backends.BACKENDS.get(name)
            if kind is not None and kind.no_far_pixels and results[name].get("far_share"):
                results[name].update(faithful=False, note="quantised: some pixels far off on the check photos")
            if results[name]["faithful"]:
                best = min(best, results[name]["seconds"])
        except Exception as exc:  # noqa: BLE001 - a backend that fails on a real photo is not chosen
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    choice, why = pick(results)
    return {"choice": choice, "why": why, "key": key, "psnr_bar": FAITHFUL_PSNR, "far_bar": FAITHFUL_FAR_SHARE,
            "threads": torch.get_num_threads(),
            "timed_at": timed, "cpu_flags": list(cpu_flags()), "results": results,
            "measure_seconds": round(time.perf_counter() - started, 1),
            "build_seconds": round(build_seconds, 1)}
