"""What building an engine shows: its own steps and one line per style, not the libraries' chatter.

Building and measuring runs torch's exporters and compilers, which talk a lot on the way: ``FutureWarning``\\ s,
``TracerWarning``\\ s and constant-folding ``UserWarning``\\ s, glog-style ``W1202 …`` lines from the ``torch.*``
loggers ("torchvision is not installed"), and ``[torch.onnx] …`` progress printed to stdout. :func:`quiet` holds
all of that back unless :func:`verbose` was asked for (``anipaint models prepare -v``): what it held back is
logged at DEBUG on ``anipaint.engine.runtime.progress``, and exceptions and ERROR records still come through.

:func:`step` reports a step of getting a style ready (``converting``, ``building compiled``, ``measuring``) on the
``anipaint.steps`` logger; :func:`following` hands those to a callback (the CLI's progress bar). :func:`summary`
is the one line a ready style's engine gets: the CLI prints it, the server logs it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import warnings
from collections.abc import Callable, Iterator

log = logging.getLogger("anipaint.engine.runtime.progress")
STEPS = logging.getLogger("anipaint.steps")
# "torch" itself: every torch logger but those TORCH_LOGS turns up inherits its level
LIBRARY_LOGGERS = ("torch", "torch.onnx", "torch._dynamo", "torch._inductor", "torch.export", "onnxscript")

_verbose = False
_lock = threading.Lock()
_depth = 0  # quiet() blocks open, in any thread: the process-wide state is changed by the first, restored by the last
_open: tuple[contextlib.ExitStack, list[warnings.WarningMessage], io.StringIO] | None = None


def verbose(on: bool = True) -> None:
    """Let the libraries' output through (``on``) or hold it back again."""
    global _verbose
    _verbose = on


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Hold back warnings, the library loggers below ERROR and anything printed to stdout while the block runs.

    The warnings filters, those loggers' levels and ``sys.stdout`` are the process's own, so nested blocks and
    blocks in other threads share one silence, lifted when the last of them ends."""
    if _verbose:
        yield
        return
    _enter()
    try:
        yield
    finally:
        _exit()


def _enter() -> None:
    global _depth, _open
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        stack = contextlib.ExitStack()
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            stack.callback(logger.setLevel, logger.level)
            logger.setLevel(max(logger.getEffectiveLevel(), logging.ERROR))
        printed = stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        _open = (stack, caught, printed)


def _exit() -> None:
    global _depth, _open
    with _lock:
        _depth -= 1
        if _depth or _open is None:
            return
        (stack, caught, printed), _open = _open, None
        stack.close()
    for message in caught:
        log.debug("%s: %s (%s:%s)", message.category.__name__, message.message, message.filename, message.lineno)
    for line in printed.getvalue().splitlines():
        log.debug("stdout: %s", line)


# ---- steps and results ---------------------------------------------------------------------------------------


def step(style_id: str, what: str) -> None:
    """Report that getting ``style_id`` ready is at step ``what`` now."""
    STEPS.info("%s: %s", style_id, what, extra={"style_id": style_id, "step": what})


class _Follower(logging.Handler):
    def __init__(self, callback: Callable[[str, str], None]) -> None:
        super().__init__(logging.INFO)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        self.callback(getattr(record, "style_id", "?"), getattr(record, "step", record.getMessage()))


@contextlib.contextmanager
def following(callback: Callable[[str, str], None]) -> Iterator[None]:
    """``callback(style_id, step)`` for each :func:`step` reported while the block runs."""
    handler, level = _Follower(callback), STEPS.level
    STEPS.addHandler(handler)
    STEPS.setLevel(logging.INFO)
    try:
        yield
    finally:
        STEPS.removeHandler(handler)
        STEPS.setLevel(level)


def summary(record: dict) -> str:
    """``compiled (built in 41.3 s, measured in 6.2 s, PSNR 48.12 dB)`` from :func:`anipaint.engine.build_backends`'s
    record, with each backend that failed to build or run and its reason (first line) at the end."""
    choice = record["choice"]
    results = record.get("results") or {}
    parts = [f"{verb} in {record[key]:.1f} s" for verb, key in (("built", "build_seconds"),
                                                               ("measured", "measure_seconds")) if key in record]
    chosen = results.get(choice, {})
    if chosen.get("reference"):
        parts.append("the reference itself")
    elif "psnr" in chosen:
        parts.append("PSNR ∞ (the reference's pictures)" if chosen["psnr"] is None else f"PSNR {chosen['psnr']} dB")
    elif not results:
        parts.append("named, not measured" if parts else "the one engine for this style")
    failed = [f"{name} ({(r['error'].splitlines() or ['?'])[0]})" for name, r in results.items() if "error" in r]
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    return f"{choice} ({', '.join(parts)})"
