"""Command-line options shared by the commands that read variables (`render`, `run`)."""

from __future__ import annotations

import click

from trainer.integers import parse_int, shown

from .targets import NAMES


class NonEmptyPath(click.Path):
    """A click.Path that refuses '': an empty path is the current folder to pathlib, never what a
    person who typed --outputs "$UNSET" meant."""

    def convert(self, value, param, ctx):
        if value == "":
            self.fail("empty path", param, ctx)
        return super().convert(value, param, ctx)


class Integer(click.IntRange):
    """click's integer (in a range, when given), of ASCII digits only (trainer/integers.py): click.INT
    also takes ' 2', '+2', '1_0' and any Unicode digit, and fails with a traceback past int()'s limit
    on digits."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and parse_int(value) is None:
            self.fail(f"{shown(value)} is not an integer", param, ctx)
        return super().convert(value, param, ctx)


def variables_options(targets: tuple[str, ...] = NAMES, namespace: bool = False):
    """FILE, -f, --set/--set-string/--set-json and --target (one of `targets`); with `namespace`, also
    --namespace."""

    def decorate(command):
        if namespace:
            command = click.option(
                "-n", "--namespace", "release_namespace", metavar="NS",
                help="The release's namespace: the objects' namespace where `namespace` is empty. Default: the "
                     "kube context's namespace, else default, as helm template takes it.",
            )(command)
        command = click.option("--target", type=click.Choice(targets), help="Override the file's target.")(command)
        command = click.option(
            "--set-json", "set_jsons", multiple=True, metavar="KEY.PATH=JSON",
            help="Override variables with JSON values, as helm --set-json (applied before --set).",
        )(command)
        command = click.option(
            "--set-string", "set_strings", multiple=True, metavar="KEY.PATH=VALUE",
            help="Override variables with string values, as helm --set-string (applied after --set).",
        )(command)
        command = click.option(
            "--set", "sets", multiple=True, metavar="KEY.PATH=VALUE",
            help="Override variables as helm --set does: a=1,b.c=x, list={x,y}, list[0]=x; true, false, "
                 "null and integers are typed, any other value is a string.",
        )(command)
        command = click.option(
            "-f", "--values", "extra_files", multiple=True, metavar="FILE",
            help="More variables files, merged in order after FILE (later wins).",
        )(command)
        return click.argument("file", required=False)(command)

    return decorate


def variables_files(file: str | None, extra_files: tuple[str, ...]) -> list[str]:
    return ([file] if file else []) + list(extra_files)
