"""The job life cycle against both stores: the embedded queue's files and a real Redis (the Celery path).

Every test runs twice, once per store, through the same :func:`run_job` the painter threads and the Celery task
call, with the real painter on real photos where a picture is painted.
"""

from __future__ import annotations

import io
import logging
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from anipaint.options import PaintOptions
from anipaint.service.queue.jobs import (
    INTERRUPTED,
    JobInfo,
    JobRequest,
    UnknownJobError,
    admitted,
    paint_runner,
    run_job,
)
from anipaint.settings import reload_settings
from support.service import photo_bytes, redis_server, resized_photo

STORES = ["files", pytest.param("redis", marks=pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"))]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=STORES)
def store(request, tmp_path: Path):
    if request.param == "files":
        from anipaint.service.queue.file_store import FileJobStore

        yield FileJobStore(tmp_path / "jobs", ttl=60)
    else:
        from anipaint.service.queue.redis_store import RedisJobStore, connect

        url = request.getfixturevalue("redis_url")
        client = connect(url)
        client.flushdb()
        yield RedisJobStore(client, ttl=60, cache=tmp_path / "remote")
        client.close()


@pytest.fixture(scope="module")
def runner(prepared_store):
    return paint_runner(reload_settings())


def _admit(store, data: bytes, **options) -> JobInfo:
    request = JobRequest(data=data, options=PaintOptions(style="v3-cute", faces=False, **options))
    info = admitted(request, position=1)
    store.create(info, request)
    return info


def test_a_job_ends_done_with_its_picture(store, runner) -> None:
    info = _admit(store, resized_photo(300), max_side=256)
    assert store.load(info.id).status == "queued"
    seen: list[JobInfo] = []

    def watched(request, progress):
        def report(stage, fraction):
            progress(stage, fraction)
            seen.append(store.load(info.id))

        return runner(request, report)

    final = run_job(store, info.id, watched)
    assert final.status == "done" and final.progress == 1.0 and final.stage == "done"
    assert store.load(info.id) == final
    assert Image.open(store.result_path(info.id)).size == (256, 256) == (final.width, final.height)
    assert seen and all(s.status == "running" and s.progress < 1.0 for s in seen)
    progress = [s.progress for s in seen]
    assert progress == sorted(progress)  # forward only
    assert store.request(info.id) is None  # the upload is released once painted


def test_a_bad_picture_fails_with_a_reason(store, runner) -> None:
    info = _admit(store, photo_bytes()[:3000])
    final = run_job(store, info.id, runner)
    assert final.status == "failed" and final.error_kind == "image" and final.error
    assert store.load(info.id).status == "failed"
    with pytest.raises(UnknownJobError):
        store.result_path(info.id)


def test_an_internal_failure_is_named_and_logged(store, caplog) -> None:
    def broken(request, progress):
        progress("paint", 0.5)
        raise RuntimeError()

    info = _admit(store, resized_photo(64))
    with caplog.at_level(logging.ERROR, logger="anipaint.service"):
        final = run_job(store, info.id, broken)
    assert (final.status, final.error, final.error_kind) == ("failed", "RuntimeError", "internal")
    assert any(info.id in r.getMessage() and r.exc_info for r in caplog.records)


def test_progress_never_goes_back_and_stays_below_one(store) -> None:
    reports: list[float] = []

    def wobbly(request, progress):
        for fraction in (0.2, 0.6, 0.4, 1.5):
            progress("paint", fraction)
            reports.append(store.load(info.id).progress)
        img = Image.open(io.BytesIO(request.data))
        return runner_output(img)

    info = _admit(store, resized_photo(64))
    assert run_job(store, info.id, wobbly).status == "done"
    assert reports == [0.2, 0.6, 0.6, 0.99]


def runner_output(img: Image.Image):
    from anipaint import imaging
    from anipaint.service.queue.jobs import PaintOutput

    return PaintOutput(imaging.encode_png(img), img.width, img.height)


def test_deleting_a_running_job_cancels_it(store, runner) -> None:
    info = _admit(store, resized_photo(900), max_side=None)
    started = threading.Event()

    def deleted_midway(request, progress):
        def report(stage, fraction):
            if not started.is_set():
                started.set()
                store.delete(info.id)  # the client's DELETE, while the painter works
            progress(stage, fraction)

        return runner(request, report)

    assert run_job(store, info.id, deleted_midway) is None
    assert started.is_set()
    with pytest.raises(UnknownJobError):
        store.load(info.id)
    with pytest.raises(UnknownJobError):
        store.result_path(info.id)


def test_a_job_whose_picture_expired_fails_as_busy(store, runner) -> None:
    info = _admit(store, resized_photo(64))
    store.release_input(info.id)
    final = run_job(store, info.id, runner)
    assert final.status == "failed" and final.error_kind == "busy" and "expired" in final.error


def test_a_deleted_job_is_not_painted(store, runner) -> None:
    info = _admit(store, resized_photo(64))
    store.delete(info.id)
    assert run_job(store, info.id, runner) is None
    with pytest.raises(UnknownJobError):
        store.load(info.id)


def test_unknown_and_hostile_ids(store) -> None:
    for job_id in ("nope", "../../etc/passwd", "A" * 24):
        with pytest.raises(UnknownJobError):
            store.load(job_id)
        with pytest.raises(UnknownJobError):
            store.delete(job_id)


def test_a_restart_paints_queued_jobs_and_fails_running_ones(tmp_path: Path, runner) -> None:
    """What the embedded queue's next process finds (Celery's broker redelivers instead)."""
    from anipaint.service.queue.file_store import FileJobStore

    before = FileJobStore(tmp_path / "jobs", ttl=60)
    queued = _admit(before, resized_photo(200), max_side=128)
    running = _admit(before, resized_photo(200))
    from anipaint.service.queue.jobs import started

    before.update(started(running))
    done = _admit(before, resized_photo(64))
    run_job(before, done.id, runner)

    after = FileJobStore(tmp_path / "jobs", ttl=60)  # a new process, same folder
    assert [i.id for i in after.recover()] == [queued.id]
    lost = after.load(running.id)
    assert (lost.status, lost.error) == ("failed", INTERRUPTED)
    assert after.load(done.id).status == "done"
    assert run_job(after, queued.id, runner).status == "done"
    assert Image.open(after.result_path(queued.id)).size == (128, 128)


def test_a_job_paint_tells_the_background_preparation_it_is_painting(store, runner) -> None:
    """While a job paints, the background warm-up hears that the server is busy (it pauses its builds), and
    hears when it is done."""
    from anipaint import warmup

    heard: list[bool] = []
    during: list[bool] = []
    unsubscribe = warmup.on_activity(heard.append)
    try:
        request = JobRequest(data=resized_photo(200), options=PaintOptions(style="v3-cute", faces=False, max_side=128))

        def progress(stage: str, fraction: float) -> None:
            if stage != "encode":  # the PNG is encoded after the paint
                during.append(warmup.busy())

        runner(request, progress)
    finally:
        unsubscribe()
    assert heard == [True, False] and during and all(during)
    assert not warmup.busy()


def test_a_state_that_could_not_be_saved_is_never_shown(tmp_path: Path) -> None:
    """A client polling while the state file cannot be written must never see 'done' for a job whose outcome
    was not recorded: it sees the job still running, then failed (shown even though it cannot be saved, so
    nobody waits forever)."""
    from anipaint.service.queue.file_store import FileJobStore
    from anipaint.service.queue.jobs import failed, started

    store = FileJobStore(tmp_path / "jobs", ttl=60)
    info = _admit(store, resized_photo(64))
    running = started(info)
    assert store.update(running)
    (store.dir / f"{info.id}.json.tmp").mkdir()  # the state file can no longer be written
    done = replace(running, status="done", stage="done", progress=1.0)
    with pytest.raises(OSError):
        store.update(done)
    assert store.load(info.id).status == "running"
    with pytest.raises(OSError):
        store.update(failed(running, "storage failed", "storage"))
    assert store.load(info.id).status == "failed"
