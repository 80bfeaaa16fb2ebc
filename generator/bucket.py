"""A job's outputs from its S3-compatible bucket (outputs.uri; the layout of trainer/bucket.py): what
scripts/run.sh and `jaxgen results s3://…` bring to this machine, without the checkpoints. Credentials
come the way every S3 client reads them (AWS_ACCESS_KEY_ID…, ~/.aws); the endpoint from
outputs.endpoint or AWS_ENDPOINT_URL."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainer import bucket as layout
from trainer import outputs
from trainer.errors import ConfigError
from trainer.extras import missing

from .errors import UserError

# What a job's bucket holds that its results do not need (run.sh leaves them on the claim too).
LEFT_OUT = (outputs.CHECKPOINTS, outputs.XLA_CACHE)


def is_uri(text: str) -> bool:
    return str(text).startswith(layout.SCHEME)


@dataclass
class Outputs:
    """A job's outputs in its bucket, listed: what fetch() downloads."""
    uri: str
    client: object
    bucket: str
    keys: dict[str, PurePosixPath]  # object key: its path in the outputs directory


def find(uri: str, endpoint: str | None = None) -> Outputs:
    """The objects under s3://BUCKET/PREFIX/ (a job's outputs: PREFIX ends in its name), without the
    checkpoints; one line on any failure, and nothing written here."""
    try:
        name, prefix = layout.split(uri)
    except ConfigError:
        raise UserError(f"{uri}: not s3://BUCKET/PREFIX/NAME (a job's outputs in its bucket)") from None
    if not prefix:
        raise UserError(f"{uri}: name the job's folder in the bucket, s3://{name}/[PREFIX/]NAME")
    if problem := missing("boto3", "s3", "fetching outputs from a bucket"):
        raise UserError(problem)
    import boto3

    try:
        client = boto3.client("s3", endpoint_url=endpoint or None)
    except ValueError as e:  # an endpoint that is not a URL
        raise UserError(f"--endpoint {endpoint!r}: {str(e)[:200]}") from None
    keys = {}
    with _failures(uri):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=f"{prefix}/"):
            for item in page.get("Contents", []):
                relative = PurePosixPath(item["Key"][len(prefix) + 1:])
                if relative.parts and relative.parts[0] not in LEFT_OUT and ".." not in relative.parts:
                    keys[item["Key"]] = relative
    if not keys:
        raise UserError(f"{uri}: no outputs there (a job's outputs are s3://BUCKET/PREFIX/NAME, NAME the job's)")
    return Outputs(uri, client, name, keys)


def fetch(found: Outputs, destination: Path) -> int:
    """Download the listed objects into `destination`, a new directory, keeping their paths; returns how many."""
    with _failures(found.uri):
        for key, relative in found.keys.items():
            target = destination.joinpath(*relative.parts)
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
        raise UserError(f"{uri}: cannot fetch the outputs ({layout.failure_reason(e)})") from None
