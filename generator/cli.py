"""The `jaxgen` command line. Heavy modules (jax, matplotlib) are only ever imported inside commands."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import click

from trainer.errors import unwritable_stdout

from . import __version__
from .errors import UserError, ValidationFailed, excerpt, printable
from .options import variables_files, variables_options

EXIT_INVALID = 2
MAX_PROBLEMS_SHOWN = 20  # a list of 100,000 bad items is one count, not 100,000 lines


def report(error: UserError, source: str | None = None) -> None:
    """Print a user error on stderr, every problem on its own line (never a traceback)."""
    if isinstance(error, ValidationFailed):
        head = f"{source}: invalid" if source else "error"
        click.echo(printable(f"{head}: {len(error.errors)} problem(s) in the variables:"), err=True)
        for line in error.errors[:MAX_PROBLEMS_SHOWN]:
            click.echo(printable(f"  {line}"), err=True)
        if len(error.errors) > MAX_PROBLEMS_SHOWN:
            click.echo(f"  … and {len(error.errors) - MAX_PROBLEMS_SHOWN} more", err=True)
    else:  # a path or name in it may be a job's choice: one line, escapes shown escaped
        click.echo(printable(f"error: {error}"), err=True)


def fail(error: UserError) -> None:
    """Report the error and exit with its code (2 unless it names another)."""
    report(error)
    sys.exit(getattr(error, "exit_code", EXIT_INVALID))


class _Group(click.Group):
    def main(self, *args, **kwargs):
        kwargs.setdefault("standalone_mode", True)
        try:
            return super().main(*args, **kwargs)
        except UserError as error:
            fail(error)
        except OSError as error:
            # A path the filesystem refuses to even look up (a name over 255 bytes): Path.exists()
            # and its kind raise it where a missing file is only False, anywhere a path is read.
            if error.errno != errno.ENAMETOOLONG or error.filename is None:
                raise
            fail(UserError(f"{excerpt(printable(os.fsdecode(error.filename)))}: {error.strerror}"))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jaxgen")
def cli() -> None:
    """Validate jax-training variables files and render their manifests.

    A variables file is JSON or YAML; unset keys take the defaults that
    `jaxgen defaults` prints (charts/jax-training/values.yaml). `jaxgen schema`
    prints the JSON Schema.
    """


@cli.command()
@variables_options(namespace=True)
@click.option("-o", "--output-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write one file per document into DIR (all files or none) instead of stdout; the previous "
                   "render there is replaced, what it did not write (a build folder's results/) is kept.")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="yaml: a multi-document stream; json: a v1 List.")
@click.option("--release", is_flag=True,
              help="With -o: also write DIR/release/ (the merged variables and what run.sh and clean.sh read), "
                   "as scripts/prepare.sh does.")
def render(file, extra_files, sets, set_strings, set_jsons, target, release_namespace, output_dir, fmt, release):
    """Validate FILE (- for stdin; none = defaults only) and render its manifests.

    Every problem is reported with its JSON path; on any problem the exit code is 2 and
    nothing is written.
    """
    from .checks import warnings
    from .engines import engine_of
    from .output import write_directory
    from .values import load_values

    if output_dir == "":
        raise UserError("-o/--output-dir: empty path (leave the option out to write to stdout)")
    if release and output_dir is None:
        raise UserError("--release: needs -o/--output-dir")
    from .names import context_namespace

    values = load_values(variables_files(file, extra_files), sets, target, release_namespace or context_namespace(),
                         set_jsons, set_strings)
    extra = {}
    engine = engine_of(values)
    if release:
        extra = engine.release_files(values)
    for warning in warnings(values):
        click.echo(f"warning: {warning}", err=True)
    if output_dir is not None:
        files = engine.files(values, fmt)
        write_directory(Path(output_dir), {**files, **extra})
        click.echo(f"wrote {len(files)} file(s) into {output_dir}: {', '.join(files)}"
                   + (" (and release/)" if extra else ""), err=True)
    else:
        click.echo(engine.stream(values, fmt), nl=False)


@cli.command()
@click.argument("files", nargs=-1, required=True)
def validate(files):
    """Check each variables FILE on its own; exit 2 if any is invalid."""
    from .values import load_values

    invalid = 0
    for path in files:
        try:
            load_values([path])
        except UserError as error:
            invalid += 1
            report(error, path)
        else:
            click.echo(f"{path}: valid")
    if invalid:
        sys.exit(EXIT_INVALID)


@cli.command()
def defaults():
    """Print every key's default, each with its description (the chart's values.yaml, which
    `helm show values charts/jax-training` prints too)."""
    from .paths import VALUES_FILE

    click.echo(VALUES_FILE.read_text(), nl=False)


@cli.command()
def schema():
    """Print the JSON Schema of a variables file."""
    from .paths import SCHEMA_FILE

    click.echo(SCHEMA_FILE.read_text(), nl=False)


from .run_command import run_command  # noqa: E402  (light: the engine is imported inside the command)
from .plot import plot_command  # noqa: E402  (matplotlib is imported inside the command)
from .results import keep_run_command, results_command  # noqa: E402
from .job_commands import list_command, logs_command, status_command  # noqa: E402
from .preflight import check_command  # noqa: E402

cli.add_command(run_command)
cli.add_command(plot_command)
cli.add_command(results_command)
cli.add_command(keep_run_command)
for command in (check_command, status_command, logs_command, list_command):
    cli.add_command(command)


EXIT_UNWRITABLE = 1


def _from_echo(error: OSError) -> bool:
    """Whether `error` came from click.echo, the one way jaxgen prints: standard output failed, not
    a file of its own."""
    import traceback

    return any(frame.name == "echo" and frame.filename == click.utils.__file__
               for frame in traceback.extract_tb(error.__traceback__))


def main() -> None:
    try:
        cli()
    except OSError as error:  # a closed pipe (`jaxgen … | head`) is left to click
        if not _from_echo(error) or (message := unwritable_stdout(error)) is None:
            raise  # not standard output's failure
        click.echo(f"error: {message}", err=True)
        sys.exit(EXIT_UNWRITABLE)


if __name__ == "__main__":
    main()
