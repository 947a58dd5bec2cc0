"""The model store: original sources in, converted artefacts out.

Layout under ``settings.home``::

    models/<style-id>/model.pt                the converted artefact (a state dict, or the graph IR)
    models/<style-id>/meta.json               source checksums + the stamp it was built under (:mod:`.stamp`)
    models/face/, models/segmenter/           the helper models (:mod:`.helpers`)
    downloads/<source path>                   files fetched by `anipaint models fetch` (:mod:`.fetch`)

:func:`convert` is idempotent (an artefact whose meta matches its sources is kept) and safe when several processes
run it at once: each style is converted under a file lock into a temporary folder that is renamed into place.
Which styles are offered and usable here, and which one a name means, is :mod:`anipaint.models.availability`'s question.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from filelock import FileLock

from anipaint import importers
from anipaint.errors import ChecksumError, DownloadError, ModelStoreError
from anipaint.models import downloads, failed_downloads, stamp
from anipaint.models.downloads import sha256_file
from anipaint.models.helpers import install_face_detector, install_segmenter, segmenter_onnx
from anipaint.models.registry import Style, all_styles, get_style
from anipaint.models.sources import fetch_source, locate_source
from anipaint.settings import Settings, get_settings

ARTEFACT = "model.pt"  # the converted file's name in a style's folder, for every architecture


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def style_dir(style: Style, settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / style.id


def artefact_path(style: Style, settings: Settings | None = None) -> Path:
    return style_dir(style, settings) / ARTEFACT


def _expected_meta(style: Style, paths: list[Path]) -> dict:
    return {
        "style": style.id,
        "format_version": stamp.FORMAT_VERSION,
        "converter": stamp.converter_digest(),
        "sources": {src.path: sha256_file(p) for src, p in zip(style.sources, paths, strict=True)},
    }


def is_converted(style: Style, settings: Settings | None = None) -> bool:
    meta = stamp.read_meta(style_dir(style, settings))
    return (
        bool(meta)
        and meta.get("format_version") == stamp.FORMAT_VERSION
        and meta.get("converter") == stamp.converter_digest()
        and artefact_path(style, settings).is_file()
    )


def _verified_sources(style: Style, settings: Settings) -> list[Path]:
    paths: list[Path] = []
    for src in style.sources:
        path = locate_source(src, settings)
        if path is None:
            hint = f"; run `anipaint models fetch {style.id}`" if src.url else ""
            raise ModelStoreError(f"{style.id}: source file {src.path} not found in {settings.sources}{hint}")
        if src.sha256 is not None:
            actual = sha256_file(path)
            if actual != src.sha256:
                raise ModelStoreError(
                    f"{style.id}: checksum mismatch for {path} (expected {src.sha256[:12]}…, got {actual[:12]}…)"
                )
        paths.append(path)
    return paths


def convert_style(style: Style, settings: Settings | None = None, *, force: bool = False) -> dict:
    """Convert one style into the store unless an up-to-date artefact is there. Returns its meta."""
    s = _settings(settings)
    s.models_dir.mkdir(parents=True, exist_ok=True)
    paths = _verified_sources(style, s)
    target = style_dir(style, s)
    with FileLock(str(s.models_dir / f".{style.id}.lock")):
        expected = _expected_meta(style, paths)
        meta = stamp.read_meta(target)
        if not force and meta and all(meta.get(k) == v for k, v in expected.items()) and is_converted(style, s):
            return meta
        work = Path(tempfile.mkdtemp(prefix=f".{style.id}-", dir=s.models_dir))
        try:
            try:
                facts = importers.convert(style.importer, paths, work)
            except ModelStoreError:
                raise
            except Exception as exc:  # a converter failure names the style and the file, not a traceback
                raise ModelStoreError(f"{style.id}: conversion failed: {exc}") from exc
            meta = {**expected, **(facts or {})}
            (work / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
            if (target / "engine").is_dir():  # compiled builds are keyed by the artefact's checksum: keep them
                os.replace(target / "engine", work / "engine")
            if target.exists():
                shutil.rmtree(target)
            os.replace(work, target)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        return meta


def convert_fetched(style: Style, paths: list[Path], settings: Settings | None = None, *,
                    force: bool = False) -> dict:
    """:func:`convert_style` for source files just fetched (``paths``, in the style's order). A file without a
    published checksum is only trusted once it converts: a downloaded one that does not convert is deleted again,
    so a wrong file never makes a style look available."""
    s = _settings(settings)
    try:
        return convert_style(style, s, force=force)
    except ModelStoreError:
        for src, path in zip(style.sources, paths, strict=True):
            if src.sha256 is None and path.is_relative_to(s.home / "downloads"):
                path.unlink(missing_ok=True)
        raise


def convert(
    style_ids: Iterable[str] | None = None,
    settings: Settings | None = None,
    *,
    force: bool = False,
    on_result: Callable[[str, str, str], None] | None = None,
) -> dict[str, str]:
    """Convert every available source (or the given styles). Returns {style id: 'ok' | 'skipped: why' | 'failed: why'}.

    A missing source is skipped, not an error; a bad checksum or a failed conversion is reported as failed. The
    helper models follow (:mod:`anipaint.models.helpers`), reported as 'face-detector' and 'segmenter'.
    """
    s = _settings(settings)
    chosen = [get_style(i) for i in style_ids] if style_ids else list(all_styles())
    results: dict[str, str] = {}
    for style in chosen:
        if any(locate_source(src, s) is None for src in style.sources):
            outcome, detail = "skipped", "source missing"
        else:
            try:
                convert_style(style, s, force=force)
                outcome, detail = "ok", ""
            except ModelStoreError as exc:
                outcome, detail = "failed", str(exc)
        results[style.id] = outcome if not detail else f"{outcome}: {detail}"
        if on_result:
            on_result(style.id, outcome, detail)
    detector = install_face_detector(s)
    results["face-detector"] = "ok" if detector else "skipped: source missing"
    segmenter = install_segmenter(s)
    if segmenter is not None:
        segmenter_onnx(segmenter)  # made now rather than in the first portrait's request
    results["segmenter"] = "ok" if segmenter else "skipped: source missing"
    return results


def needs_download(style: Style, settings: Settings | None = None) -> bool:
    """Whether painting the style first needs files this machine does not have (it is not converted, and a source
    is missing here)."""
    s = _settings(settings)
    return not is_converted(style, s) and any(locate_source(src, s) is None for src in style.sources)


def download_missing(style: Style, settings: Settings | None = None) -> list[Path]:
    """The style's source files, downloading the missing ones: first use, as a paint does it. A failure is
    remembered (:mod:`.failed_downloads`): until the next try is due, this fails at once with the same reason.

    Raises :class:`DownloadError` with the cause (``why``), whether it is ``lasting`` and when the next try is due."""
    s = _settings(settings)
    failed = failed_downloads.pending(style, s)
    if failed is not None:
        raise _download_error(style, failed)
    paths: list[Path] = []
    name = ""
    try:
        for src in style.sources:
            name = Path(src.path).name
            with downloads.progress_bar(name) as progress:
                paths.append(fetch_source(src, s, progress=progress))
    except DownloadError as exc:
        if "another process" in exc.why:  # not a failed download: somebody else's is still going
            raise
        raise _download_error(style, failed_downloads.record(style, s, exc.why, lasting=exc.lasting)) from exc
    except ChecksumError as exc:
        why = f"the origin sends a different {name} (it fails its checksum)"
        raise _download_error(style, failed_downloads.record(style, s, why, lasting=True)) from exc
    failed_downloads.clear(style, s)
    return paths


def _download_error(style: Style, failed: failed_downloads.FailedDownload) -> DownloadError:
    return DownloadError(
        f"style {style.id} could not be downloaded ({failed.why}); retry at {failed.retry_clock()}, or now with "
        f"`anipaint models fetch {style.id}`",
        why=failed.why, lasting=failed.lasting, retry_at=failed.retry_at, style=style.id,
    )


def ensure_converted(style: Style, settings: Settings | None = None) -> Path:
    """The artefact for a style, converting it (and unless offline, downloading it) on first use."""
    s = _settings(settings)
    if not is_converted(style, s):
        if s.fetches_on_first_use and needs_download(style, s):
            convert_fetched(style, download_missing(style, s), s)
        else:
            convert_style(style, s)
    return artefact_path(style, settings)
