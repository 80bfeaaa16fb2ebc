"""A job's outputs from its S3-compatible bucket (outputs.uri; the layout of trainer/bucket.py): what
scripts/run.sh and `jaxgen results s3://…` bring to this machine, without the checkpoints. Credentials
come the way every S3 client reads them (AWS_ACCESS_KEY_ID…, ~/.aws); the endpoint from
outputs.endpoint or AWS_ENDPOINT_URL."""

from __future__ import annotations

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


def fetch(uri: str, destination: Path, endpoint: str | None = None) -> int:
    """Download the objects under s3://BUCKET/PREFIX/ (a job's outputs: PREFIX ends in its name) into
    `destination`, a new directory, keeping their paths; returns how many. One line on any failure."""
    try:
        name, prefix = layout.split(uri)
    except ConfigError:
        raise UserError(f"{uri}: not s3://BUCKET/PREFIX/NAME (a job's outputs in its bucket)") from None
    if not prefix:
        raise UserError(f"{uri}: name the job's folder in the bucket, s3://{name}/[PREFIX/]NAME")
    if problem := missing("boto3", "s3", "fetching outputs from a bucket"):
        raise UserError(problem)
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = boto3.client("s3", endpoint_url=endpoint or None)
    except ValueError as e:  # an endpoint that is not a URL
        raise UserError(f"--endpoint {endpoint!r}: {str(e)[:200]}") from None
    count = 0
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=f"{prefix}/"):
            for item in page.get("Contents", []):
                relative = PurePosixPath(item["Key"][len(prefix) + 1:])
                if not relative.parts or relative.parts[0] in LEFT_OUT or ".." in relative.parts:
                    continue
                target = destination.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(name, item["Key"], str(target))
                count += 1
    except ClientError as e:
        error = e.response.get("Error", {})
        raise UserError(f"{uri}: cannot fetch the outputs ({error.get('Code', '?')}: "
                        f"{error.get('Message') or 'no message'})") from None
    except (BotoCoreError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{uri}: cannot fetch the outputs ({reason[:300]})") from None
    if not count:
        raise UserError(f"{uri}: no outputs there (a job's outputs are s3://BUCKET/PREFIX/NAME, NAME the job's)")
    return count

