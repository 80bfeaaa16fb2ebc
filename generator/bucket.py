"""A job's outputs from its S3-compatible bucket (outputs.uri; the layout of trainer/bucket.py): what
scripts/run.sh and `jaxgen results s3://…` bring to this machine, without the checkpoints. Credentials
come the way every S3 client reads them (AWS_ACCESS_KEY_ID…, ~/.aws); the endpoint from
outputs.endpoint or AWS_ENDPOINT_URL."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainer import bucket as layout
from trainer import outputs
from trainer.errors import ConfigError
from trainer.extras import missing

from .errors import UserError, printable

# What a job's bucket holds that its results do not need (run.sh leaves them on the claim too).
LEFT_OUT = outputs.RESTART_STATE
SKIPPED_SHOWN = 10  # warnings naming the objects left out, before a count of the rest


def is_uri(text: str) -> bool:
    return str(text).startswith(layout.SCHEME)


@dataclass
class Outputs:
    """A job's outputs in its bucket, listed: what fetch() downloads."""
    uri: str
    client: object
    bucket: str
    keys: dict[str, tuple[str, ...]]  # object key: its path in the outputs directory, as names
    skipped: list[str]  # one warning per object left out because it names no file of the outputs

    def warnings(self) -> list[str]:
        """The warnings, the first SKIPPED_SHOWN of them, then how many more there are."""
        more = len(self.skipped) - SKIPPED_SHOWN
        return self.skipped[:SKIPPED_SHOWN] + ([f"and {more} more objects left out"] if more > 0 else [])


def find(uri: str, endpoint: str | None = None) -> Outputs:
    """The objects under s3://BUCKET/PREFIX/ (a job's outputs: PREFIX ends in its name), without the
    checkpoints; one line on any failure, and nothing written here."""
    try:
        name, prefix = layout.split(uri)
    except ConfigError:
        raise UserError(f"{printable(uri)}: not s3://BUCKET/PREFIX/NAME (a job's outputs in its bucket)") from None
    if not prefix:
        raise UserError(f"{printable(uri)}: name the job's folder in the bucket, s3://{name}/[PREFIX/]NAME")
    if outputs.file_parts(prefix.rsplit("/", 1)[-1]) is None:  # the name of the local folder it is fetched into
        raise UserError(f"{printable(uri)}: its last name is no job's folder name (not . or .., at most "
                        f"{outputs.NAME_MAX} bytes)")
    if problem := missing("boto3", "s3", "fetching outputs from a bucket"):
        raise UserError(problem)
    import boto3

    try:
        client = boto3.client("s3", endpoint_url=endpoint or None)
    except ValueError as e:  # an endpoint that is not a URL
        raise UserError(f"--endpoint {endpoint!r}: {str(e)[:200]}") from None
    keys, skipped = {}, []
    with _failures(uri):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=f"{prefix}/"):
            for item in page.get("Contents", []):
                key = item["Key"]
                parts = layout.key_parts(key, prefix)
                marker = key.endswith("/") and (key == f"{prefix}/" or layout.key_parts(key[:-1], prefix))
                if parts is None and not marker:  # a folder's marker (`a/`) has nothing to write
                    skipped.append(f"left out s3://{name}/{printable(key)}: not a file name below s3://{name}/"
                                   f"{printable(prefix)}/ (an absolute path, an empty, . or .. name, or one too long)")
                elif parts and parts[0] not in LEFT_OUT:
                    keys[key] = parts
    folders = {parts[:i] for parts in keys.values() for i in range(1, len(parts))}
    for key in [key for key, parts in keys.items() if parts in folders]:  # `a` beside `a/b`: a file cannot be both
        del keys[key]
        skipped.append(f"left out s3://{name}/{printable(key)}: other objects use its name as a folder")
    if not keys:
        raise UserError(f"{printable(uri)}: no outputs there (a job's outputs are s3://BUCKET/PREFIX/NAME, NAME the "
                        "job's)")
    return Outputs(uri, client, name, keys, skipped)


def fetch(found: Outputs, destination: Path) -> int:
    """Download the listed objects into `destination`, a new directory (made here: never one that is
    there, nor a link), keeping their paths; returns how many."""
    with _failures(found.uri):
        destination.mkdir()
        for key, parts in found.keys.items():
            target = destination.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            found.client.download_file(found.bucket, key, str(target))
    return len(found.keys)


@contextmanager
def _failures(uri: str):
    """An S3 or network failure as one line naming the URI."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (ClientError, BotoCoreError, OSError) as e:
        raise UserError(f"{printable(uri)}: cannot fetch the outputs ({layout.failure_reason(e)})") from None
