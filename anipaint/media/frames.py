"""Painting a sequence of frames (a video, an animated picture) as a stream: decode, paint and steady overlapping.

A reader thread pulls frames from the source (so the decoder runs there) and caps them like any picture. The
caller's thread works out the motion from the previous input frame (:mod:`anipaint.media.temporal`), paints the
frames, in batches where the engine gains from it (measured on the first frames of each clip), mixes in the
strength, steadies each frame along the motion, and yields it. Queues are bounded, so a long clip holds a few
frames in memory at a time.

The motion is found between paints, not on the reader thread ahead of them: the paint keeps both cores busy with
its own threads, and a flow computed beside it stalled them (v3-cute's steady clips took 1.26-1.45× the
frame-by-frame time with the flow on the reader, 1.06-1.29× with it here; docs/benchmarks.md).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from anipaint import postprocess, preprocess
from anipaint.errors import OptionError
from anipaint.media import temporal
from anipaint.media.temporal import Motion, MotionEstimator, Steadier
from anipaint.options import PaintOptions

if TYPE_CHECKING:  # the painter (and torch) load on first paint, not when a video's options are checked
    from anipaint.painter import Painter

AHEAD = 8  # frames decoded ahead of the painting
BATCH = 4  # frames per engine call when batching pays
BATCH_MAX_PIXELS = 1024 * 1024  # larger frames are painted one by one (they may be tiled or painted in strips)
STILLS_ONLY = "portrait mode and a background style paint pictures, not videos"
_END = object()


@dataclass
class _Frame:
    image: Image.Image  # as decoded (full resolution): the face pass cuts its crops from it
    work: preprocess.WorkImage
    motion: Motion | None  # from the previous input frame, found on the painting side (None until then)


def frame_options(asked: PaintOptions | None, painter: Painter) -> PaintOptions:
    """The options a clip is painted with: the settings' defaults, faces only when asked for (a face pass per frame
    costs time and can flicker), temporal consistency on unless turned off."""
    asked = asked or PaintOptions()
    if asked.portrait or asked.background:
        raise OptionError(STILLS_ONLY)
    return replace(asked.settled(painter.settings), faces=asked.faces is True, temporal=asked.temporal is not False)


def paint_frames(
    painter: Painter,
    frames: Iterable[Image.Image],
    options: PaintOptions,
    *,
    on_frame: Callable[[int], None] | None = None,
) -> Iterator[np.ndarray]:
    """Painted frames (uint8 RGB, or RGBA where the frame has alpha), in order, for ``options`` from
    :func:`frame_options`. Errors raised by the source come out here; closing the iterator stops the reader."""
    stop = threading.Event()
    ahead: queue.Queue = queue.Queue(maxsize=AHEAD)
    reader = threading.Thread(target=_read, args=(frames, options, ahead, stop), name="frame-reader", daemon=True)
    reader.start()
    steadier = Steadier() if options.temporal else None
    estimator = MotionEstimator() if options.temporal else None
    steady_input = Steadier(temporal.INPUT_ALPHA) if options.temporal and temporal.INPUT_ALPHA > 0 else None
    batching = _Batching(painter)
    done = 0
    try:
        while True:
            group = _take(ahead, batching.size())
            if not group:
                return
            if estimator is not None:
                for frame in group:
                    frame.motion = estimator.next(frame.work.rgb)
                    if steady_input is not None:
                        frame.work = replace(frame.work, rgb=steady_input.next(frame.work.rgb, frame.motion))
            for frame, painted in zip(group, _paint(painter, group, options, batching), strict=True):
                finished = np.asarray(postprocess.finish(painted, frame.work.alpha, frame.work.rgb, options.strength))
                out = steadier.next(finished, frame.motion) if steadier is not None else finished
                done += 1
                if on_frame is not None:
                    on_frame(done)
                yield out
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting on a full queue
            try:
                ahead.get_nowait()
            except queue.Empty:
                reader.join(0.05)


def _read(frames: Iterable[Image.Image], options: PaintOptions, ahead: queue.Queue, stop: threading.Event) -> None:
    try:
        for image in frames:
            work = preprocess.to_work_image(image, options.max_side)
            if not _put(ahead, _Frame(image, work, None), stop):
                return
    except BaseException as exc:  # handed to the painting side, which raises it in the caller's thread
        _put(ahead, exc, stop)
        return
    _put(ahead, _END, stop)


def _put(ahead: queue.Queue, item: object, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            ahead.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _take(ahead: queue.Queue, size: int) -> list[_Frame]:
    """Up to ``size`` frames: waits for the first, then takes what the reader has ready (never waits for a batch
    to fill)."""
    group: list[_Frame] = []
    while len(group) < size:
        try:
            item = ahead.get() if not group else ahead.get(timeout=0.5)
        except queue.Empty:
            break
        if item is _END:
            ahead.put(_END)  # seen again by the next call
            break
        if isinstance(item, BaseException):
            raise item
        group.append(item)
    return group


def _paint(painter: Painter, group: list[_Frame], options: PaintOptions, batching: _Batching) -> list[np.ndarray]:
    if options.faces:
        # The whole pipeline per frame (the face pass cuts its crops from the full-resolution frame).
        full = replace(options, strength=1.0)  # the strength is mixed in with the others'
        return [np.asarray(painter.paint(f.image, full).convert("RGB")) for f in group]
    rgbs = [f.work.rgb for f in group]
    start = time.perf_counter()
    if len(rgbs) > 1:
        painted = list(painter.paint_batch(np.stack(rgbs)))
    else:
        painted = [painter.paint_array(rgbs[0])]
    batching.record(len(rgbs), time.perf_counter() - start, rgbs[0].shape)
    return painted


class _Batching:
    """Whether a batch of frames paints faster per frame than one frame, measured on this clip's first frames:
    the first frame warms the engine, the second is timed alone, the next :data:`BATCH` together."""

    def __init__(self, painter: Painter) -> None:
        self._single: float | None = None
        self._calls = 0
        self.decided: bool | None = None if painter.engine.backend.batches else False

    def size(self) -> int:
        if self.decided is None:
            return BATCH if self._calls >= 2 else 1
        return BATCH if self.decided else 1

    def record(self, frames: int, seconds: float, shape: tuple[int, ...]) -> None:
        self._calls += 1
        if self.decided is not None:
            return
        if shape[0] * shape[1] > BATCH_MAX_PIXELS:
            self.decided = False
        elif frames == 1 and self._calls == 2:
            self._single = seconds
        elif frames > 1 and self._single is not None:
            self.decided = seconds / frames < 0.9 * self._single
