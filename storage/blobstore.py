"""Where payloads over `INLINE_MAX` live: a folder by default, S3 (through boto3) at scale.

Objects are zstd frames keyed by the SHA-256 of the payload they hold. A put is idempotent (the same
address always holds the same bytes) and happens before the transaction that references it, so no
committed row ever points at an object that was not written.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import unquote, urlparse

from formats.extras import require
from storage.errors import BadLedgerUrl, BlobStoreUnavailable, MissingPayload


class BlobStore(Protocol):
    """The four things the Ledger asks of a blob store."""

    url: str

    def put(self, sha256: str, frame: bytes) -> None:
        """Store `frame` under `sha256` unless it is already there."""

    def put_file(self, sha256: str, path: Path) -> None:
        """Store the frame in file `path` under `sha256` unless it is already there."""

    def get(self, sha256: str) -> bytes:
        """The frame stored under `sha256`; `MissingPayload` when there is none."""

    def open(self, sha256: str) -> IO[bytes]:
        """The frame stored under `sha256` as a stream to read in chunks (a large payload never
        has to fit in memory); `MissingPayload` when there is none. The caller closes it."""

    def addresses(self) -> Iterator[str]:
        """Every address in the store (for `verify`'s orphan check)."""

    def delete(self, sha256: str) -> None:
        """Remove the object under `sha256` (a pruning, after its signed record committed); no
        error when there is none."""


def _key_path(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256}.zst"


class FolderStore:
    """Blobs as files `ab/abcdef....zst` under a folder, written atomically (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()

    def _path(self, sha256: str) -> Path:
        return self.root / _key_path(sha256)

    def put(self, sha256: str, frame: bytes) -> None:
        target = self._path(sha256)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(frame)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise BlobStoreUnavailable(f"cannot write blob {sha256} under {self.root}: {e}") from e

    def put_file(self, sha256: str, path: Path) -> None:
        target = self._path(sha256)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".incoming-{os.getpid()}-{sha256}"
        try:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, target)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise BlobStoreUnavailable(f"cannot write blob {sha256} under {self.root}: {e}") from e

    def get(self, sha256: str) -> bytes:
        try:
            return self._path(sha256).read_bytes()
        except FileNotFoundError as e:
            raise MissingPayload(sha256, f"no object in {self.root}") from e

    def open(self, sha256: str) -> IO[bytes]:
        try:
            return open(self._path(sha256), "rb")
        except FileNotFoundError as e:
            raise MissingPayload(sha256, f"no object in {self.root}") from e
        except OSError as e:
            raise BlobStoreUnavailable(f"cannot read blob {sha256} under {self.root}: {e}") from e

    def delete(self, sha256: str) -> None:
        try:
            self._path(sha256).unlink(missing_ok=True)
        except OSError as e:
            raise BlobStoreUnavailable(f"cannot remove blob {sha256} under {self.root}: {e}") from e

    def addresses(self) -> Iterator[str]:
        if not self.root.exists():
            return
        for path in self.root.glob("??/*.zst"):
            yield path.name.removesuffix(".zst")


class S3Store:
    """Blobs as objects `prefix/ab/abcdef....zst` in an S3 bucket (or anything that speaks S3).

    The endpoint comes from `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL` (boto3's own variables) or an
    `endpoint` query parameter, so MinIO, moto and real S3 all work. The client never goes through an
    HTTP proxy: the storage layer's own traffic must not be recorded by the proxy it serves.
    """

    def __init__(self, bucket: str, prefix: str, endpoint: str | None, region: str | None) -> None:
        boto3 = require("boto3", "s3")
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        config = Config(
            connect_timeout=2,
            read_timeout=30,
            retries={"max_attempts": 2, "mode": "standard"},
            proxies={},
        )
        self._client: Any = boto3.client(
            "s3", endpoint_url=endpoint, region_name=region or "us-east-1", config=config
        )

    def _key(self, sha256: str) -> str:
        key = _key_path(sha256)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _translate(self, e: Exception, sha256: str, verb: str) -> Exception:
        from botocore.exceptions import ClientError

        if isinstance(e, ClientError):
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchKey", "NotFound"):
                return MissingPayload(sha256, f"no object in {self.url}")
        return BlobStoreUnavailable(f"cannot {verb} blob {sha256} in {self.url}: {e}".splitlines()[0])

    def _exists(self, sha256: str) -> bool:
        try:
            self._client.head_object(Bucket=self.bucket, Key=self._key(sha256))
            return True
        except Exception as e:
            err = self._translate(e, sha256, "check")
            if isinstance(err, MissingPayload):
                return False
            raise err from e

    def put(self, sha256: str, frame: bytes) -> None:
        if self._exists(sha256):
            return
        try:
            self._client.put_object(Bucket=self.bucket, Key=self._key(sha256), Body=frame)
        except Exception as e:
            raise self._translate(e, sha256, "upload") from e

    def put_file(self, sha256: str, path: Path) -> None:
        if self._exists(sha256):
            return
        try:
            self._client.upload_file(str(path), self.bucket, self._key(sha256))
        except Exception as e:
            raise self._translate(e, sha256, "upload") from e

    def get(self, sha256: str) -> bytes:
        try:
            obj = self._client.get_object(Bucket=self.bucket, Key=self._key(sha256))
            return bytes(obj["Body"].read())
        except Exception as e:
            raise self._translate(e, sha256, "read") from e

    def open(self, sha256: str) -> IO[bytes]:
        try:
            obj = self._client.get_object(Bucket=self.bucket, Key=self._key(sha256))
        except Exception as e:
            raise self._translate(e, sha256, "read") from e
        return io.BufferedReader(_Body(obj["Body"], self, sha256), buffer_size=1 << 20)

    def delete(self, sha256: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(sha256))
        except Exception as e:
            raise self._translate(e, sha256, "remove") from e

    def addresses(self) -> Iterator[str]:
        paginator = self._client.get_paginator("list_objects_v2")
        start = f"{self.prefix}/" if self.prefix else ""
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                for item in page.get("Contents", []):
                    name = item["Key"].rsplit("/", 1)[-1]
                    if name.endswith(".zst"):
                        yield name.removesuffix(".zst")
        except Exception as e:
            raise BlobStoreUnavailable(f"cannot list {self.url}: {e}".splitlines()[0]) from e


class _Body(io.RawIOBase):
    """An S3 object's streaming body as a file to read from; read errors become the store's own."""

    def __init__(self, body: Any, store: S3Store, sha256: str) -> None:
        self._body = body
        self._store = store
        self._sha = sha256

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._body.read(len(buffer))
        except Exception as e:
            raise self._store._translate(e, self._sha, "read") from e
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._body.close()
        super().close()


def open_blob_store(url: str) -> BlobStore:
    """A blob store from `file:///path` (or a plain path) or `s3://bucket/prefix[?endpoint=...]`."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return FolderStore(Path(unquote(parsed.path if parsed.scheme else url)).expanduser())
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise BadLedgerUrl(f"blob store URL {url!r} names no bucket (s3://BUCKET/PREFIX)")
        query = dict(p.split("=", 1) for p in parsed.query.split("&") if "=" in p)
        endpoint = (
            query.get("endpoint")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        return S3Store(parsed.netloc, parsed.path, endpoint, query.get("region"))
    raise BadLedgerUrl(f"blob store URL {url!r}: use file:///DIR or s3://BUCKET/PREFIX")
