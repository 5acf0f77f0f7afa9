"""Witnesses: where checkpoints are kept out of the Ledger writers' reach, and read back.

- `file:///PATH` (or a plain path): one JSON line per checkpoint, appended (`O_APPEND`, fsynced). A
  file the operator names: on another machine's mount, a disk the writer's user cannot write later.
- `s3://BUCKET/PREFIX[?endpoint=URL&retain_days=N&mode=COMPLIANCE|GOVERNANCE]`: one object per
  checkpoint, written once (`If-None-Match: *`) under S3 Object Lock (a retention date, default 10
  years, mode COMPLIANCE): not even the account that wrote it can delete or overwrite it before
  then. The bucket must have been created with Object Lock enabled; a put it refuses says so.
- `http://` or `https://`: the checkpoint POSTed as JSON; a GET of the same URL gives back every
  checkpoint kept, as JSON lines or one JSON array (a transparency log's witness, a small service).

The storage layer's own traffic: never through an HTTP proxy (`trust_env=False`, no proxies).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, quote, unquote, urlparse

from formats.extras import require
from storage.errors import BadLedgerUrl, StorageError
from storage.witness.checkpoint import BadCheckpoint, Checkpoint, parse

RETAIN_DAYS = 3650
"""An S3 witness's Object Lock retention when its URL names none."""


class WitnessUnavailable(StorageError):
    """A witness that cannot be written to or read from (one line naming it)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """One thing a witness holds: a checkpoint, or why what it holds is not one."""

    where: str
    checkpoint: Checkpoint | None
    problem: str = ""


class Witness(Protocol):
    url: str

    def publish(self, checkpoint: Checkpoint) -> str:
        """Keep `checkpoint`; give back where it went."""

    def read(self) -> Iterator[Kept]:
        """Every checkpoint kept."""


def _kept(where: str, text: str | bytes) -> Kept:
    try:
        return Kept(where, parse(json.loads(text)))
    except (ValueError, BadCheckpoint) as e:
        return Kept(where, None, str(e).splitlines()[0] if isinstance(e, BadCheckpoint) else "not JSON")


class FileWitness:
    """Checkpoints as JSON lines in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = path.as_uri()

    def publish(self, checkpoint: Checkpoint) -> str:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (checkpoint.line() + "\n").encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise WitnessUnavailable(f"cannot write the witness file {self.path}: {e.strerror}") from e
        return str(self.path)

    def read(self) -> Iterator[Kept]:
        try:
            text = self.path.read_text("utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as e:
            raise WitnessUnavailable(f"cannot read the witness file {self.path}: {e.strerror}") from e
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                yield _kept(f"{self.path}:{n}", line)


class S3Witness:
    """Checkpoints as objects under S3 Object Lock."""

    def __init__(self, bucket: str, prefix: str, query: dict[str, str]) -> None:
        boto3 = require("boto3", "s3")
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        endpoint = (
            query.get("endpoint")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        try:
            self.retain_days = int(query.get("retain_days", RETAIN_DAYS))
        except ValueError as e:
            raise BadLedgerUrl(f"witness {self.url}: retain_days must be a number of days") from e
        self.mode = query.get("mode", "COMPLIANCE").upper()
        if self.mode not in ("COMPLIANCE", "GOVERNANCE"):
            raise BadLedgerUrl(f"witness {self.url}: mode must be COMPLIANCE or GOVERNANCE")
        config = Config(connect_timeout=2, read_timeout=30, retries={"max_attempts": 2}, proxies={})
        self._client: Any = boto3.client(
            "s3", endpoint_url=endpoint, region_name=query.get("region", "us-east-1"), config=config
        )

    def _name(self, checkpoint: Checkpoint) -> str:
        stamp = checkpoint.at.replace(" ", "T").replace(":", "")
        name = f"checkpoint-{stamp}-{quote(checkpoint.signer, safe='')}-{checkpoint.signature[:16]}.json"
        return f"{self.prefix}/{name}" if self.prefix else name

    def publish(self, checkpoint: Checkpoint) -> str:
        key = self._name(checkpoint)
        until = datetime.now(UTC) + timedelta(days=self.retain_days)
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=checkpoint.line().encode("ascii"),
                ContentType="application/json",
                ObjectLockMode=self.mode,
                ObjectLockRetainUntilDate=until,
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
            )
        except Exception as e:
            said = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise WitnessUnavailable(
                f"cannot publish to the witness {self.url} (a bucket made with Object Lock): {said}"
            ) from e
        return f"s3://{self.bucket}/{key}"

    def read(self) -> Iterator[Kept]:
        start = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start)
            keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
            for key in sorted(keys):
                if key.rsplit("/", 1)[-1].startswith("checkpoint-"):
                    body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
                    yield _kept(f"s3://{self.bucket}/{key}", body)
        except Exception as e:
            raise WitnessUnavailable(f"cannot read the witness {self.url}: {e}".splitlines()[0]) from e


class HttpWitness:
    """Checkpoints POSTed to an endpoint that gives them all back on GET."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _client(self) -> Any:
        import httpx

        return httpx.Client(trust_env=False, timeout=10.0)

    def publish(self, checkpoint: Checkpoint) -> str:
        import httpx

        try:
            with self._client() as client:
                answer = client.post(
                    self.url, content=checkpoint.line(), headers={"content-type": "application/json"}
                )
        except httpx.HTTPError as e:
            raise WitnessUnavailable(f"cannot publish to the witness {self.url}: {e}") from e
        if not answer.is_success:
            raise WitnessUnavailable(
                f"the witness {self.url} refused the checkpoint: HTTP {answer.status_code}"
            )
        return self.url

    def read(self) -> Iterator[Kept]:
        import httpx

        try:
            with self._client() as client:
                answer = client.get(self.url, headers={"accept": "application/json"})
        except httpx.HTTPError as e:
            raise WitnessUnavailable(f"cannot read the witness {self.url}: {e}") from e
        if not answer.is_success:
            raise WitnessUnavailable(f"the witness {self.url} answered HTTP {answer.status_code}")
        text = answer.text.strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                yield Kept(self.url, None, "not JSON")
                return
            for n, item in enumerate(items if isinstance(items, list) else [], 1):
                yield _kept(f"{self.url}#{n}", json.dumps(item))
            return
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                yield _kept(f"{self.url}#{n}", line)


def open_witness(url: str) -> Witness:
    """A witness from its URL (`file://`, a path, `s3://`, `http(s)://`)."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return FileWitness(Path(unquote(parsed.path if parsed.scheme else url)).expanduser())
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise BadLedgerUrl(f"witness URL {url!r} names no bucket (s3://BUCKET/PREFIX)")
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        return S3Witness(parsed.netloc, parsed.path, query)
    if parsed.scheme in ("http", "https"):
        return HttpWitness(url)
    raise BadLedgerUrl(f"witness URL {url!r}: use file:///PATH, s3://BUCKET/PREFIX or https://HOST/PATH")
