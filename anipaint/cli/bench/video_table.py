"""Video: frames per second at 512 px with the default style, temporal consistency on and off.

The clip is the shared real one (``realshort.mp4``, a handheld pan with sound) scaled to 512 px on its long side,
painted end to end by :func:`anipaint.media.video.paint_video` (decode, paint, steady, encode H.264 with the sound), in
turns on and off in one warm process; the ratio is off ÷ on, so 0.9 means temporal consistency costs 11 %.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from anipaint.cli.bench.measure import Row, peak_rss_mb, reset_peak_rss
from anipaint.settings import Settings

SIDE = 512


def _scaled_clip(src: Path, dst: Path, side: int) -> int:
    """``src`` re-encoded with its long side at ``side`` (sound copied); returns its frame count."""
    import av

    count = 0
    with av.open(str(src)) as a, av.open(str(dst), mode="w") as b:
        vin = a.streams.video[0]
        scale = side / max(vin.codec_context.width, vin.codec_context.height)
        vout = b.add_stream("libx264", rate=vin.average_rate)
        vout.width = round(vin.codec_context.width * scale / 2) * 2
        vout.height = round(vin.codec_context.height * scale / 2) * 2
        vout.pix_fmt, vout.options = "yuv420p", {"crf": "16"}
        for frame in a.decode(vin):
            picture = frame.to_image().resize((vout.width, vout.height))
            for p in vout.encode(av.VideoFrame.from_image(picture)):
                b.mux(p)
            count += 1
        for p in vout.encode():
            b.mux(p)
    return count


def video_rows(settings: Settings, rounds: int) -> list[Row]:
    from anipaint.media.video import paint_video
    from anipaint.options import PaintOptions
    from anipaint.painter import get_painter

    source = settings.samples_dir / "realshort.mp4"
    if not source.is_file():
        return [Row("video", float("nan"), note=f"no clip at {source}")]
    painter = get_painter(settings.default_style, settings).warm()
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.mp4"
        frames = _scaled_clip(source, clip, SIDE)
        seconds: dict[bool, list[float]] = {True: [], False: []}
        rss: dict[bool, float] = {}
        import time

        for temporal in (False, True):  # warm-up
            paint_video(painter, clip, Path(tmp) / "out.mp4", PaintOptions(temporal=temporal, max_side=SIDE))
        for _ in range(rounds):
            for temporal in (False, True):
                tracked = reset_peak_rss()
                start = time.perf_counter()
                paint_video(painter, clip, Path(tmp) / "out.mp4", PaintOptions(temporal=temporal, max_side=SIDE))
                seconds[temporal].append(time.perf_counter() - start)
                if tracked:
                    rss[temporal] = max(rss.get(temporal, 0.0), peak_rss_mb())
    name = f"video {SIDE} px, {painter.style.id} ({painter.engine.backend_name}), {frames} frames"
    off, on = (statistics.median(seconds[t]) / frames for t in (False, True))
    return [
        Row(f"{name}, temporal off", off, 1.0, rss_mb=rss.get(False), note=f"{1 / off:.1f} frames/s"),
        Row(f"{name}, temporal on", on, off / on, rss_mb=rss.get(True),
            note=f"{1 / on:.1f} frames/s; costs {on / off:.2f}x frame by frame"),
    ]
