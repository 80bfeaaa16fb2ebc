"""Command-line options shared by the commands that read variables (`render`, `run`)."""

from __future__ import annotations

import click

from .targets import NAMES
from .names import DEFAULT_NAMESPACE


def variables_options(targets: tuple[str, ...] = NAMES, namespace: bool = False):
    """FILE, -f, --set and --target (one of `targets`); with `namespace`, also --namespace."""

    def decorate(command):
        if namespace:
            command = click.option(
                "-n", "--namespace", "release_namespace", default=DEFAULT_NAMESPACE, show_default=True,
                metavar="NS", help="The release's namespace: the objects' namespace where `namespace` is empty.",
            )(command)
        command = click.option("--target", type=click.Choice(targets), help="Override the file's target.")(command)
        command = click.option(
            "--set", "sets", multiple=True, metavar="KEY.PATH=VALUE",
            help="Override one variable; VALUE is read as YAML (e.g. --set training.epochs=3).",
        )(command)
        command = click.option(
            "-f", "--values", "extra_files", multiple=True, metavar="FILE",
            help="More variables files, merged in order after FILE (later wins).",
        )(command)
        return click.argument("file", required=False)(command)

    return decorate


def variables_files(file: str | None, extra_files: tuple[str, ...]) -> list[str]:
    return ([file] if file else []) + list(extra_files)
