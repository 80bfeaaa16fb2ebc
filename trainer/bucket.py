"""A job's outputs in an S3-compatible bucket (--outputs-uri s3://BUCKET/PREFIX): process 0 keeps its
outputs directory (trainer/outputs.py) on local disk as always, and mirrors it to
s3://BUCKET/PREFIX/<run-name>/ with the same layout, so the results outlive pods whose disks do not.

    checkpoints/ckpt-<step>.npz   each saved checkpoint, uploaded by the checkpoint writer's thread
    checkpoints/latest.json       {"step", "file"}: written after the checkpoint it names, so a reader
                                  never sees a step whose object is not complete (an S3 PUT is atomic)
    metrics.jsonl                 with each checkpoint and at the end
    model/…, summary.json         at the end, summary.json last (its presence says the run finished)

At start, before the checkpoint is restored, the bucket's newest checkpoint (and its metrics, when the
local directory has none) is downloaded into the local outputs directory: a pod that lost its disk
resumes where the bucket is. Credentials and the endpoint come the way every S3 client reads them
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL…); --outputs-endpoint names a server of
its own. Any failure is a CheckpointError: one line, the checkpoint exit code.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from trainer import outputs
from trainer.config import named
from trainer.errors import CheckpointError, ConfigError, first_line
from trainer.extras import missing

SCHEME = "s3://"
# s3://bucket[/prefix]: a bucket name as S3 allows it (3 to 63 of a-z 0-9 . -, alphanumeric at both ends).
URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^\x00\n\r]*)?$")
LATEST = f"{outputs.CHECKPOINTS}/latest.json"
KEEP = 2  # checkpoints kept in the bucket, as on disk (trainer/checkpoint.py)
MAX_MARKER = 1 << 16  # bytes of LATEST read: {"step", "file"} is a few dozen


def split(uri: str) -> tuple[str, str]:
    """(bucket, prefix without slashes at either end) of an s3:// URI, or a ConfigError naming the flag."""
    m = URI.match(uri)
    if not m:
        raise ConfigError(f"{named('outputs_uri')} {uri!r} must be s3://BUCKET[/PREFIX] (a bucket name: 3 to 63 of "
                          "a-z 0-9 . -)")
    return m.group(1), (m.group(2) or "").strip("/")


def job_uri(uri: str, run_name: str) -> str:
    """Where a job's outputs are kept in the bucket of --outputs-uri `uri`: s3://BUCKET/PREFIX/<run_name>."""
    bucket, prefix = split(uri)
    return f"{SCHEME}{bucket}/{prefix}/{run_name}" if prefix else f"{SCHEME}{bucket}/{run_name}"


def key_parts(key: str, prefix: str) -> tuple[str, ...] | None:
    """The path below a job's outputs that the object `key`, listed under `prefix/`, stands for, as
    names (outputs.file_parts), or None when it stands for none: not under the prefix, or no file name
    there (`prefix//home/u/.bashrc`, `prefix/../x`). Every reader of a listed key goes through here."""
    head = f"{prefix}/"
    return outputs.file_parts(key[len(head):]) if key.startswith(head) else None


def failure_reason(e: Exception) -> str:
    """An S3 or network failure in a few words: the service's error code and message, or the first line."""
    error = getattr(e, "response", {}).get("Error", {})
    if error:
        reason = f"{error.get('Code', '?')}: {error.get('Message') or 'no message'}"
    else:
        reason = first_line(e)
    return reason[:300]


class Bucket:
    """The bucket side of one job's outputs directory: s3://<bucket>/<prefix>/<run_name>/."""

    def __init__(self, uri: str, run_name: str, endpoint: str | None = None):
        self.bucket, prefix = split(uri)
        self.prefix = f"{prefix}/{run_name}" if prefix else run_name
        self.uri = job_uri(uri, run_name)
        if problem := missing("boto3", "s3", named("outputs_uri")):
            raise ConfigError(problem)
        import boto3
        from botocore.config import Config

        try:
            self._client = boto3.client("s3", endpoint_url=endpoint or None,
                                        config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                                      connect_timeout=10, read_timeout=60))
        except ValueError as e:  # an endpoint that is not a URL
            raise ConfigError(f"{named('outputs_endpoint')} {endpoint!r}: {str(e)[:200]}") from None

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}"

    def _call(self, what: str, fn, *args, **kwargs):
        """fn(*args, **kwargs), its S3 or network failure a CheckpointError naming `what` and the bucket."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except (ClientError, BotoCoreError, OSError) as e:
            raise self._failure(what, e) from None

    def _failure(self, what: str, e: Exception) -> CheckpointError:
        return CheckpointError(f"{self.uri}: cannot {what} ({failure_reason(e)})")

    def check(self) -> None:
        """Fail at start, not at the first checkpoint, when the bucket cannot be reached or read."""
        self._call(f"reach bucket {self.bucket}", self._client.head_bucket, Bucket=self.bucket)

    def _put(self, path: Path, relative: str) -> None:
        self._call(f"upload {relative}", self._client.upload_file, str(path), self.bucket, self.key(relative))

    def _put_bytes(self, data: bytes, relative: str) -> None:
        self._call(f"upload {relative}", self._client.put_object, Bucket=self.bucket, Key=self.key(relative),
                   Body=data)

    def _get(self, relative: str, read=lambda body: body.read()):
        """read(body) of an object's body (its bytes by default), or None when there is no such object."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return read(self._client.get_object(Bucket=self.bucket, Key=self.key(relative))["Body"])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._failure(f"read {relative}", e) from None
        except (BotoCoreError, OSError) as e:
            raise self._failure(f"read {relative}", e) from None

    def _get_lines(self, relative: str, destination: Path) -> bool:
        """An object of lines into `destination`, a piece at a time (never held whole), up to its last
        complete line: an upload may have caught a line half-written. False when there is no such object."""
        def read(body) -> bool:
            fd, tmp = tempfile.mkstemp(dir=destination.parent, prefix=".download-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    complete = 0  # bytes up to the last newline written
                    for chunk in body.iter_chunks(1 << 20):
                        if (at := chunk.rfind(b"\n")) >= 0:
                            complete = out.tell() + at + 1
                        out.write(chunk)
                    out.truncate(complete)
                os.replace(tmp, destination)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return True

        return bool(self._get(relative, read))

    def _download(self, relative: str, destination: Path) -> None:
        """One object into `destination`, through a temporary file renamed into place."""
        fd, tmp = tempfile.mkstemp(dir=destination.parent, prefix=".download-", suffix=".tmp")
        os.close(fd)
        try:
            self._call(f"download {relative}", self._client.download_file, self.bucket, self.key(relative), tmp)
            os.replace(tmp, destination)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def upload_checkpoint(self, run_dir: Path, path: Path, step: int) -> None:
        """A checkpoint just written to disk, the metrics so far, then the marker naming the step; then the
        bucket's older checkpoints beyond the newest KEEP are removed."""
        self._put(path, f"{outputs.CHECKPOINTS}/{path.name}")
        self.upload_metrics(run_dir)
        self._put_bytes(json.dumps({"step": step, "file": path.name}).encode(), LATEST)
        listed = self._call("list the checkpoints", self._client.list_objects_v2, Bucket=self.bucket,
                            Prefix=self.key(f"{outputs.CHECKPOINTS}/"))
        steps = sorted((int(m.group(1)), item["Key"]) for item in listed.get("Contents", [])
                       if (parts := key_parts(item["Key"], self.prefix)) and len(parts) == 2
                       and (m := outputs.CHECKPOINT_FILE.match(parts[1])))
        for old_step, key in steps[:-KEEP]:
            if old_step < step:
                self._call(f"remove {key}", self._client.delete_object, Bucket=self.bucket, Key=key)

    def upload_metrics(self, run_dir: Path) -> None:
        if (run_dir / outputs.METRICS).is_file():
            self._put(run_dir / outputs.METRICS, outputs.METRICS)

    def restore(self, run_dir: Path, log) -> int | None:
        """Download the bucket's newest checkpoint into run_dir/checkpoints/ when it is newer than the local
        ones (and the metrics when run_dir has none); returns its step, or None when the bucket has none."""
        marker = self._get(LATEST, lambda body: body.read(MAX_MARKER + 1))  # the bucket's: read with a bound
        if marker is None:
            return None
        try:
            if len(marker) > MAX_MARKER:
                raise ValueError("too large")
            latest = json.loads(marker)
            step, name = int(latest["step"]), str(latest["file"])
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"{self.uri}/{LATEST}: not a checkpoint marker of this trainer; "
                                  "move it away or use another --outputs-uri") from None
        if not outputs.CHECKPOINT_FILE.match(name):
            raise CheckpointError(f"{self.uri}/{LATEST}: names {name[:100]!r}, not a checkpoint file")
        local = run_dir / outputs.CHECKPOINTS
        local.mkdir(parents=True, exist_ok=True)
        have = outputs.newest_checkpoint(run_dir)
        if have is None or have[0] < step:
            self._download(f"{outputs.CHECKPOINTS}/{name}", local / name)
            log(f"downloaded the checkpoint of step {step} from {self.uri}")
        metrics = run_dir / outputs.METRICS
        if not metrics.exists():
            self._get_lines(outputs.METRICS, metrics)
        return step

    def upload_results(self, run_dir: Path) -> None:
        """The finished run's files (the model, the metrics, the curves), then summary.json."""
        for path in sorted(run_dir.rglob("*")):
            relative = path.relative_to(run_dir).as_posix()
            top = relative.split("/", 1)[0]
            if path.is_file() and top in (outputs.MODEL, outputs.METRICS, outputs.CURVES):
                self._put(path, relative)
        if (run_dir / outputs.SUMMARY).is_file():
            self._put(run_dir / outputs.SUMMARY, outputs.SUMMARY)


def of(uri: str | None, run_name: str, endpoint: str | None = None) -> Bucket | None:
    """The job's Bucket when --outputs-uri is given, else None."""
    return Bucket(uri, run_name, endpoint) if uri else None
