"""Pictures and clips of the scaled-out queue in an S3-compatible object store, so Redis holds only state.

``ANIPAINT_OBJECT_STORE=s3://bucket/prefix`` with the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``) names the store: AWS S3, MinIO, Ceph or
SeaweedFS alike. A job's upload is ``<prefix>/jobs/<id>/input`` and its result ``<prefix>/jobs/<id>/result``.

boto3 is the client: it is the reference S3 SDK, reads those variables itself, retries with back-off, and
streams uploads and downloads in parts (``upload_fileobj`` / ``download_file``), so neither side holds a whole
clip in memory. Objects go with their jobs (cancel, delete); :meth:`ObjectStore.sweep` removes what belongs to no
job any more (a result past its TTL, what a crash left).
"""

from __future__ import annotations

import io
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from anipaint.errors import AnipaintError
from anipaint.service.uploads import rewound

log = logging.getLogger("anipaint.service")
PART = 8 * 1024 * 1024  # multipart upload part size (S3's minimum is 5 MB)
SPOOL = 1024 * 1024  # an object fetched by a painter stays in memory up to this, then goes to a temporary file


class ObjectStoreError(AnipaintError):
    """The object store is misconfigured: a bad address, a missing bucket or refused credentials."""


class ObjectStoreUnavailable(OSError):  # noqa: N818 - it is a state, like ConnectionError
    """The object store cannot be reached now (it may come back): callers answer 503 or fail the job with this
    reason. An OSError, like a full disk under the embedded queue: the job runner records it as the job's failure."""


def _unavailable(exc: Exception) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)) >= 500
    return isinstance(exc, BotoCoreError | OSError)


class ObjectStore:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise ObjectStoreError(f"ANIPAINT_OBJECT_STORE={url!r}: expected s3://bucket or s3://bucket/prefix")
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.url, self.bucket = url, parts.netloc
        self.prefix = parts.path.strip("/")
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=60)
        self.s3 = boto3.client("s3", config=config, region_name=os.environ.get("AWS_REGION") or "us-east-1")
        # boto3 reads each part of a file object into memory, and by default ten may wait their turn (80 MB a
        # transfer); one part at a time keeps a clip's upload to one part in memory.
        self.transfers = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, use_threads=False)

    def key(self, job_id: str, part: str) -> str:
        return "/".join(p for p in (self.prefix, "jobs", job_id, part) if p)

    def _call(self, fn: Callable, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if _unavailable(exc):
                raise ObjectStoreUnavailable(f"the object store is unreachable ({exc})") from exc
            raise

    def patiently(self, wait: float, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)``, tried again while the store is unreachable, for up to ``wait`` seconds: a painter
        rides out a store restart instead of failing the job it holds."""
        deadline = time.monotonic() + wait
        pause = 0.5
        while True:
            try:
                return fn(*args, **kwargs)
            except ObjectStoreUnavailable:
                if time.monotonic() + pause > deadline:
                    raise
                log.warning("the object store is unreachable; trying again in %.1f s", pause)
                time.sleep(pause)
                pause = min(5.0, pause * 2)

    def check(self) -> None:
        """Refuse to start, in one sentence, when the bucket is missing or the credentials are refused."""
        from botocore.exceptions import ClientError

        try:
            self._call(self.s3.head_bucket, Bucket=self.bucket)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            why = {404: "does not exist", 403: "refuses these credentials"}.get(status, f"answered {status}")
            raise ObjectStoreError(f"object store {self.url}: bucket {self.bucket!r} {why}") from None
        except ObjectStoreUnavailable as exc:
            raise ObjectStoreError(f"object store {self.url}: {exc}") from None

    def reachable(self) -> str | None:
        """None, or why the store cannot be used now (for /readyz)."""
        try:
            self._call(self.s3.head_bucket, Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001 - every reason is reported, none is fatal here
            return f"the object store is unreachable ({exc})"
        return None

    def put(self, key: str, data: bytes | BinaryIO) -> None:
        """Store bytes, or a seekable file from its start, one part of :data:`PART` at a time."""
        body = io.BytesIO(data) if isinstance(data, bytes | bytearray) else rewound(data)
        self._call(self.s3.upload_fileobj, body, self.bucket, key, Config=self.transfers)

    def get(self, key: str) -> BinaryIO | None:
        """The object as a file read from its start (in memory up to 1 MB, then on disk), or None when there is no
        such object."""
        from botocore.exceptions import ClientError

        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL)  # noqa: SIM115 - the caller owns it
        try:
            self._call(self.s3.download_fileobj, self.bucket, key, spool, Config=self.transfers)
        except ClientError as exc:
            spool.close()
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    def download(self, key: str, path: Path) -> bool:
        """Stream an object into ``path`` (written whole or not at all); False when there is no such object."""
        from botocore.exceptions import ClientError

        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(fd)
        try:
            self._call(self.s3.download_file, self.bucket, key, tmp)
            os.replace(tmp, path)
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return False
            raise
        finally:
            Path(tmp).unlink(missing_ok=True)

    def delete(self, keys: Iterable[str]) -> None:
        objects = [{"Key": k} for k in keys]
        if objects:
            self._call(self.s3.delete_objects, Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})

    def keys(self) -> list[str]:
        """Every object under this store's jobs prefix."""
        paginator = self.s3.get_paginator("list_objects_v2")
        prefix = self.key("", "").rstrip("/") + "/"
        pages = self._call(lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix)))
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def sweep(self, is_job: Callable[[str], bool]) -> int:
        """Delete the objects of jobs that no longer exist (expired, deleted, or left by a crash); returns how many."""
        prefix = self.key("", "").rstrip("/") + "/"
        orphans = [k for k in self.keys() if not is_job(k[len(prefix):].split("/", 1)[0])]
        for start in range(0, len(orphans), 1000):
            self.delete(orphans[start:start + 1000])
        return len(orphans)
