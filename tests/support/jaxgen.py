"""Run jaxgen in-process (click's runner): fast enough for corpora and property tests."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner

from generator.cli import cli
from tests.support import kubernetes_yaml


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def documents(self) -> list[dict]:
        """The rendered documents as Kubernetes reads them."""
        return kubernetes_yaml.decode(self.stdout)


def jaxgen(*args: str, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)
