"""Run jaxgen in-process (click's runner): fast enough for corpora and property tests."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from click.testing import CliRunner

from generator.cli import cli


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def documents(self) -> list[dict]:
        return [doc for doc in yaml.safe_load_all(self.stdout) if doc is not None]


def jaxgen(*args: str, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)
