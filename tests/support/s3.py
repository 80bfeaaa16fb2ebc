"""A real S3-compatible HTTP server for the bucket tests: moto's server (`moto_server`, from the test
extra that scripts/setup.sh dev installs), started as its own process on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.procs import free_port

# What the server accepts (any key pair); the trainer reads them as every S3 client does.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "jaxt-test-key", "AWS_SECRET_ACCESS_KEY": "jaxt-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


class S3Server:
    """moto_server on `host` (0.0.0.0 to be reached from pods); `url` as the host itself reaches it."""

    def __init__(self, log: Path, host: str = "127.0.0.1"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "wb") as out:
            self.popen = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", host,
                                           "-p", str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError(f"moto_server exited ({self.popen.returncode}):\n{self.log.read_text()[-2000:]}")
            try:
                self.client().list_buckets()
                return
            except Exception:  # noqa: BLE001  (not listening yet)
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"moto_server did not answer within {timeout} s:\n{self.log.read_text()[-2000:]}")

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")

    def bucket(self, name: str) -> str:
        """Create bucket `name`; returns it."""
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def stop(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
