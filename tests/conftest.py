"""Shared fixtures: one model store per test session, prepared from the real sources in ../shared/models.

The environment is set before anipaint reads its settings, so every test, and every server subprocess a test
starts, uses the same session store and never the user's ~/.cache/anipaint.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.paths import GROUP_PHOTO, REPO, SOURCES

# Under pytest-xdist every worker shares the controller's home (the store's file locks keep each conversion and
# engine build to one per run); the controller, which made it, removes it at the end.
_SESSION_HOME = Path(os.environ.get("ANIPAINT_TEST_SESSION_HOME") or tempfile.mkdtemp(prefix="anipaint-test-home-"))
os.environ["ANIPAINT_TEST_SESSION_HOME"] = str(_SESSION_HOME)
# Each xdist worker gets cores of its own (the engine sizes its threads from the affinity, and the servers and CLI
# runs a test starts inherit it): two workers spinning two OpenMP threads each on two cores run ~5x slower.
if "PYTEST_XDIST_WORKER" in os.environ and hasattr(os, "sched_setaffinity"):
    _cpus = sorted(os.sched_getaffinity(0))
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _index = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
    _mine = _cpus[_index % len(_cpus) :: max(1, min(_workers, len(_cpus)))]
    os.sched_setaffinity(0, _mine)
os.environ["ANIPAINT_HOME"] = str(_SESSION_HOME)
# Every engine build and device model made in a test process, one JSON line each: the controller lists them at the
# end of the run and fails it if one was made twice in the session store (each build at most once per run).
if not os.environ.get("ANIPAINT_TEST_BUILD_LOG"):
    _fd, _log = tempfile.mkstemp(prefix="anipaint-test-builds-", suffix=".jsonl")
    os.close(_fd)
    os.environ["ANIPAINT_TEST_BUILD_LOG"] = _log
BUILD_LOG = Path(os.environ["ANIPAINT_TEST_BUILD_LOG"])
os.environ["ANIPAINT_SOURCES"] = str(SOURCES)
# Test servers convert the other styles in the background but build no engines (minutes of CPU each);
# tests/cli/test_first_run.py checks the full background warm-up.
os.environ.setdefault("ANIPAINT_BACKGROUND", "convert")
# Nothing in the tests reaches the internet: a style whose files are missing is an error, not a download, except
# where a test serves a local mirror and turns downloads on (ANIPAINT_OFFLINE=0).
os.environ["ANIPAINT_OFFLINE"] = "1"



# CI has every model file under ../shared/models but the PyTorch port's four .pt files, every test-only runtime,
# Redis and Chromium (.ci/run installs them): a skip there hides a defect, so it fails instead.
PORT_FILES = ("face_paint_512_v1.pt", "face_paint_512_v2.pt", "celeba_distill.pt", "paprika.pt")


def _no_skips_in_ci(report) -> None:
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    if not any(name in reason for name in PORT_FILES):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where nothing should be missing: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ARG001 - pytest hook signature
    _no_skips_in_ci((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # noqa: ARG001 - pytest hook signature (module-level skips)
    _no_skips_in_ci((yield).get_result())


class _BuildRecorder(logging.Handler):
    """Appends anipaint.engine.builds' records of what was built, and how long it took, to :data:`BUILD_LOG`."""

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "build_path"):
            line = json.dumps({"path": record.build_path, "seconds": round(record.build_seconds, 1)})
            with BUILD_LOG.open("a") as f:  # one short append: whole lines from every worker
                f.write(line + "\n")


def pytest_configure(config):  # noqa: ARG001 - pytest hook signature
    builds_log = logging.getLogger("anipaint.engine.builds")
    builds_log.setLevel(logging.DEBUG)
    builds_log.addHandler(_BuildRecorder())


def _built_in_this_run() -> tuple[list[dict], list[str]]:
    """What the run built (longest first), and the session store's builds made more than once."""
    try:
        rows = [json.loads(line) for line in BUILD_LOG.read_text().splitlines() if line.strip()]
    except OSError:
        rows = []
    made = [r["path"] for r in rows if Path(r["path"]).is_relative_to(_SESSION_HOME)]
    return sorted(rows, key=lambda r: -r["seconds"]), sorted({p for p in made if made.count(p) > 1})


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - pytest hook signature
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller removes the home
        return
    session.config.stash[_BUILT], twice = _built_in_this_run()
    if twice:
        session.config.stash[_TWICE] = twice
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    BUILD_LOG.unlink(missing_ok=True)
    shutil.rmtree(_SESSION_HOME, ignore_errors=True)


_BUILT = pytest.StashKey[list]()
_TWICE = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest hook signature
    """The run's engine builds with their times, so CI's log shows a build that got slower or came back."""
    rows = config.stash.get(_BUILT, [])
    if not rows:
        return
    total = sum(r["seconds"] for r in rows)
    terminalreporter.section(f"engine builds in this run: {len(rows)}, {total:.0f} s")
    for r in rows:
        path = Path(r["path"])
        where = "" if path.is_relative_to(_SESSION_HOME) else "  (a test's own store)"
        terminalreporter.write_line(f"{r['seconds']:7.1f}s  {path.parent.parent.name}/{path.name}{where}")
    for path in config.stash.get(_TWICE, []):
        terminalreporter.write_line(f"built more than once in the session store: {path}", red=True)


@pytest.fixture(scope="session")
def sources() -> Path:
    if not SOURCES.is_dir():
        pytest.skip(f"model sources not found at {SOURCES}")
    return SOURCES


@pytest.fixture(scope="session")
def session_home() -> Path:
    return _SESSION_HOME


@pytest.fixture(scope="session")
def prepared_store(sources: Path) -> Path:
    """The session store with every available style converted once."""
    from anipaint.models import store
    from anipaint.settings import reload_settings

    settings = reload_settings()
    results = store.convert(None, settings)
    failed = {k: v for k, v in results.items() if v.startswith("failed")}
    assert not failed, failed
    return settings.models_dir


@pytest.fixture(scope="session")
def engine_builds(prepared_store: Path):
    """``build(style_id)``: the style's fast engines built and measured by ``auto`` in the session store, once per
    run whoever asks first; returns auto's record. Tests that start from an empty store copy these builds in
    (:func:`seed_builds`), so that they check measuring and the switch onto a built engine, not the compile."""
    from anipaint.engine import build_backends
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.settings import reload_settings

    records: dict[str, dict] = {}

    def build(style_id: str) -> dict:
        if style_id not in records:
            style = get_style(style_id)
            settings = reload_settings()
            records[style_id] = build_backends(style, store.artefact_path(style, settings), settings, "auto")
        return records[style_id]

    return build


@pytest.fixture(scope="session")
def device_model(engine_builds):
    """``make(style_id)``: the style's device model (the ONNX file the page paints with in the browser) in the
    session store, made once per run from the style's ``onnxruntime`` build, which :func:`engine_builds` makes
    for everyone (so a test that paints on the device is marked ``builds``, as making one exports and checks)."""
    from anipaint.engine.onnx import device_models
    from anipaint.models.registry import get_style
    from anipaint.settings import reload_settings

    made: dict[str, object] = {}

    def make(style_id: str):
        if style_id not in made:
            engine_builds(style_id)
            made[style_id] = device_models.ensure(get_style(style_id), reload_settings())
        return made[style_id]

    return make


@pytest.fixture(scope="session")
def tensorflow() -> str:
    """The interpreter to run TensorFlow in: a subprocess of its own, so that TensorFlow and torch never share a
    process. A test that asks for it is marked ``tensorflow`` (kept out of ``make test-fast``)."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow (a test dependency) is not installed")
    return sys.executable


@pytest.fixture(scope="session")
def original_outputs(tensorflow: str, tmp_path_factory: pytest.TempPathFactory):
    """``run(kind, model, arrays)``: an original model file's outputs from its own runtime
    (tests/support/tf_reference.py: TensorFlow, or LiteRT for ``tflite``), computed once per run for the same file and
    inputs."""
    folder = tmp_path_factory.mktemp("originals")
    outputs: dict[str, dict[str, np.ndarray]] = {}

    def run(kind: str, model: Path, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        digest = hashlib.sha256(f"{kind}|{Path(model).resolve()}".encode())
        for key in sorted(arrays):
            digest.update(key.encode() + str(arrays[key].shape).encode() + np.ascontiguousarray(arrays[key]).data)
        name = digest.hexdigest()[:16]
        if name not in outputs:
            src, dst = folder / f"{name}-in.npz", folder / f"{name}-out.npz"
            np.savez(src, **arrays)
            reference = REPO / "tests" / "support" / "tf_reference.py"
            proc = subprocess.run([tensorflow, str(reference), kind, str(model), str(src),
                                   str(dst)], capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            outputs[name] = dict(np.load(dst))
        return outputs[name]

    return run


@pytest.fixture(scope="session")
def memory_probe():
    """``run(script, *args)``: a Python script in an interpreter of its own, so that the peak RSS it reports is
    its own paint's. The tests that ask for it paint pictures of several megapixels to show that memory stays
    bounded, so they are marked ``memory`` (kept out of ``make test-fast``)."""

    def run(script: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=900)

    return run


# Markers given by the fixtures a test uses (registered in pyproject.toml): `make test-fast` leaves these out.
# `browser` is test_page.py's fixture (headless Chromium), which every page test asks for; `cluster` is
# test_scaleout.py's web process and two Celery workers over a real Redis; `installed` is test_wheel.py's fresh
# virtual environment with the wheel built from this checkout; `schemathesis_run` is test_openapi.py's fuzzing run.
MARKED_BY_FIXTURE = {"engine_builds": "builds", "own_build_home": "builds", "tensorflow": "tensorflow",
                     "browser": "browser", "memory_probe": "memory", "cluster": "scaleout", "installed": "wheel",
                     "schemathesis_run": "fuzz"}


@pytest.fixture
def own_build_home(tmp_path: Path) -> Path:
    """An empty model store for a test that builds an engine itself, for what building says or leaves behind
    rather than for the engine (which :func:`engine_builds` makes once per run for everyone)."""
    return tmp_path / "home"


def pytest_collection_modifyitems(config, items):  # noqa: ARG001 - pytest hook signature
    for item in items:
        for fixture, marker in MARKED_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)




@pytest.fixture(scope="session")
def group_photo() -> Image.Image:
    if not GROUP_PHOTO.is_file():
        pytest.skip("sample photo missing")
    return Image.open(GROUP_PHOTO).convert("RGB")


@pytest.fixture(scope="session")
def astronaut() -> Image.Image:
    data = pytest.importorskip("skimage.data")
    return Image.fromarray(data.astronaut())
