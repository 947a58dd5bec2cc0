"""Videos: decode, paint (steady along the motion unless turned off) and encode H.264 at the source frame rate, with
the sound carried over.

PyAV (FFmpeg) does the container work, so every format FFmpeg reads is accepted. Decoding runs in the frame
reader's thread and encoding in a writer thread, so the three overlap (:mod:`anipaint.media.frames`); the sound is
copied packet by packet, interleaved with the video by time. Frames go through the same pipeline as single
pictures (cap, strength, faces when asked for), so a video looks like its stills.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image

from anipaint.errors import ImageError
from anipaint.media.frames import AHEAD, frame_options, paint_frames
from anipaint.options import PaintOptions

# libx264's options for the painted clip. crf 18 is visually lossless for flat, drawn pictures at medium speed.
# psy=0 turns off x264's psychovisual tuning, which keeps the look of grain by spending bits on texture that then
# differs from frame to frame: steady clips come out 2-5 % steadier and 10 % smaller, as sharp (x264's own
# "animation" tune lowers it too). Measured with the others tried in docs/benchmarks.md (hand-held footage).
ENCODER_OPTIONS = {"crf": "18", "preset": "medium", "x264-params": "psy=0"}

VIDEO_SUFFIXES = {".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v"}
# What an upload's first bytes say it is: ISO base media (MP4, MOV, M4V) has a box type at offset 4, Matroska
# (WebM, MKV) starts with the EBML magic.
_BOX_TYPES = (b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip")
_EBML = b"\x1a\x45\xdf\xa3"
# HEIC/HEIF and AVIF photos are ISO base media files too; their `ftyp` brands say they are pictures.
_PICTURE_BRANDS = {b"mif1", b"msf1", b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"avif", b"avis"}


def _picture_brands(data: bytes) -> bool:
    """Whether an ISO base media file's `ftyp` box names a still-picture (HEIF/AVIF) brand, major or compatible."""
    if data[4:8] != b"ftyp":
        return False
    size = int.from_bytes(data[:4], "big")
    box = data[8:min(size, 256) if size >= 16 else 16]
    brands = [box[i:i + 4] for i in range(0, len(box) - 3, 4) if i != 4]  # [4:8] is the minor version
    return any(b in _PICTURE_BRANDS for b in brands)


def is_video(path: Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def looks_like_video(data: bytes) -> str | None:
    """The container an upload's first bytes announce ("mp4" for MP4/MOV, "webm" for WebM/MKV), or None."""
    if len(data) >= 12 and data[4:8] in _BOX_TYPES and not _picture_brands(data):
        return "mp4"
    if data[:4] == _EBML:
        return "webm"
    return None


@dataclass(frozen=True)
class VideoFacts:
    """What a container says about its first video stream, read without decoding it."""

    width: int
    height: int
    frames: int  # 0 when the container does not say
    seconds: float
    fps: float
    has_audio: bool


def probe_video(src: Path | bytes | BinaryIO) -> VideoFacts:
    """The clip's size, length and streams (from a file, an upload's bytes or a seekable file object), or ImageError
    when it is not a video FFmpeg can read."""
    import io

    import av

    name = str(src) if isinstance(src, str | Path) else "the video"
    if isinstance(src, bytes):
        source: str | BinaryIO = io.BytesIO(src)
    elif isinstance(src, str | Path):
        source = str(src)
    else:
        src.seek(0)
        source = src
    try:
        with av.open(source, "r") as container:
            if not container.streams.video:
                raise ImageError(f"{name}: has no video stream")
            vin = container.streams.video[0]
            rate = vin.average_rate or Fraction(25, 1)
            seconds = float(container.duration / 1e6) if container.duration else 0.0
            if not seconds and vin.duration and vin.time_base:
                seconds = float(vin.duration * vin.time_base)
            frames = vin.frames or round(seconds * float(rate))
            return VideoFacts(vin.codec_context.width, vin.codec_context.height, frames, seconds, float(rate),
                              bool(container.streams.audio))
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise ImageError(f"{name}: not a video we can read ({exc})") from None


def paint_video(
    painter,
    src: Path,
    dst: Path,
    options: PaintOptions | None = None,
    *,
    on_frame: Callable[[int, int], None] | None = None,
) -> dict:
    """Paint every frame of ``src`` into ``dst`` (.mp4) with ``options`` (see
    :func:`anipaint.media.frames.frame_options`). Returns {"frames", "fps", "width", "height", "temporal"}.

    ``on_frame(done, total)`` reports progress (total is 0 when the container does not say).
    """
    import av

    options = frame_options(options, painter)
    facts = probe_video(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    rate = Fraction(facts.fps).limit_denominator(100000)
    with av.open(str(src)) as sound_source, av.open(str(dst), mode="w") as out:
        writer = _Writer(out, rate, sound_source)
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done = n
            if on_frame is not None:
                on_frame(n, facts.frames)

        try:
            for painted in paint_frames(painter, _decoded(src), options, on_frame=advance):
                writer.put(painted[..., :3])
        finally:
            writer.close()
        if done == 0:
            raise ImageError(f"{src}: the video has no frames")
        size = writer.size
    return {"frames": done, "fps": float(rate), "width": size[0], "height": size[1], "temporal": options.temporal}


def _decoded(src: Path) -> Iterator[Image.Image]:
    """The video's frames, upright (a phone's rotation applied), as pictures."""
    import av

    try:
        with av.open(str(src)) as container:
            vin = container.streams.video[0]
            vin.thread_type = "AUTO"
            for frame in container.decode(vin):
                image = frame.to_image()
                turn = getattr(frame, "rotation", 0) or 0  # degrees counter-clockwise to display upright
                if turn % 360:
                    image = image.rotate(turn % 360, expand=True)
                yield image
    except av.FFmpegError as exc:
        raise ImageError(f"{src}: the video could not be decoded ({exc})") from None


class _Writer:
    """Encodes frames in its own thread and muxes the sound's packets in by time as the video reaches them."""

    def __init__(self, out, rate: Fraction, sound_source) -> None:
        self._out, self._rate = out, rate
        ain = sound_source.streams.audio[0] if sound_source.streams.audio else None
        self._ain, self._aout, self._vout = ain, None, None
        self._sound = sound_source.demux(ain) if ain is not None else iter(())
        self._pending_sound = None
        self._frames: queue.Queue = queue.Queue(maxsize=AHEAD)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="video-writer", daemon=True)
        self._thread.start()

    def put(self, rgb: np.ndarray) -> None:
        if self._error is not None:
            raise self._error
        self._frames.put(rgb)

    @property
    def size(self) -> tuple[int, int]:
        return (self._vout.width, self._vout.height) if self._vout is not None else (0, 0)

    def _open_streams(self, height: int, width: int):
        """The output's streams, made when the first painted frame gives the size (a phone's rotation applied)."""
        vout = self._out.add_stream("libx264", rate=self._rate)
        vout.width, vout.height = width - width % 2, height - height % 2  # yuv420p needs even sides
        vout.pix_fmt = "yuv420p"
        vout.options = dict(ENCODER_OPTIONS)
        if self._ain is not None:
            self._aout = self._out.add_stream_from_template(self._ain)
        return vout

    def close(self) -> None:
        self._frames.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        import av

        try:
            while (rgb := self._frames.get()) is not None:
                if self._vout is None:
                    self._vout = self._open_streams(*rgb.shape[:2])
                vout = self._vout
                h, w = vout.height, vout.width
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:h, :w]), format="rgb24")
                for packet in vout.encode(frame):
                    self._mux_sound_until(packet)
                    self._out.mux(packet)
            if self._vout is None:
                return
            for packet in self._vout.encode():
                self._mux_sound_until(packet)
                self._out.mux(packet)
            self._mux_sound_until(None)
        except BaseException as exc:
            self._error = exc
            while self._frames.get() is not None:  # drain, so the painting side never blocks on a dead writer
                pass

    def _mux_sound_until(self, packet) -> None:
        """Mux the sound's packets up to ``packet``'s time (all that are left when None)."""
        if self._aout is None:
            return
        limit = None if packet is None or packet.dts is None else float(packet.dts * packet.time_base)
        while True:
            sound = self._pending_sound or next(self._sound, None)
            self._pending_sound = None
            if sound is None:
                return
            if sound.dts is None:  # the demuxer's flush packet
                continue
            if limit is not None and float(sound.dts * sound.time_base) > limit:
                self._pending_sound = sound
                return
            sound.stream = self._aout
            self._out.mux(sound)
