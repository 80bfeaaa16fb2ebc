"""The trainer's command line with hostile values: each is one `Rank 0: error:` line (or argparse's
usage line) and the exit code of trainer/exit_codes.py for its kind, never a traceback."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from trainer import exit_codes
from trainer.config import FROM_VARIABLES_ENV

CASES = [
    (["--learning-rate", "inf"], exit_codes.CONFIG, "--learning-rate inf must be a finite number > 0"),
    (["--learning-rate", "nan"], exit_codes.CONFIG, "--learning-rate nan must be a finite number > 0"),
    (["--momentum", "nan"], exit_codes.CONFIG, "--momentum nan must be in [0, 1)"),
    (["--hang-timeout", "inf"], exit_codes.CONFIG, "argument --hang-timeout: 'inf' is not an integer"),
    (["--mlp-hidden-sizes", ","], exit_codes.CONFIG, "argument --mlp-hidden-sizes"),
    (["--run-name", ".."], exit_codes.CONFIG, "--run-name '..' must name one directory"),
    (["--checkpoint-dir", "/dev/null"], exit_codes.CHECKPOINT, "--checkpoint-dir /dev/null: not a directory"),
    (["--data-dir", "/dev/null"], exit_codes.DATA, "/dev/null: the data directory is not a directory"),
    # checked before any data is read: once a traceback (numpy's seed, a modulo by zero), a run on all
    # examples but one (a slice [:-1]), minutes of thread creation, and XLA's SIGSEGV
    (["--seed", "-1"], exit_codes.CONFIG, "--seed -1 must be >= 0"),
    (["--compilation-cache", "/dev/null"], exit_codes.CONFIG,
     "the compilation cache '/dev/null' is not a directory (from --compilation-cache)"),
    # a name over 255 bytes: Path.exists() raises where a missing file is only False (was a traceback)
    (["--checkpoint-dir", "/tmp/" + "a" * 300], exit_codes.CONFIG, "File name too long"),
    (["--data-dir", "/tmp/" + "a" * 300], exit_codes.CONFIG, "File name too long"),
    (["--model-parallelism", "0"], exit_codes.CONFIG, "--model-parallelism 0 must be >= 1"),
    (["--train-examples", "-1"], exit_codes.CONFIG, "--train-examples -1 must be >= 0 (0 = all)"),
    (["--cpu-threads", "100000"], exit_codes.CONFIG, "--cpu-threads 100000 must be from 0 to 1024"),
    (["--local-device-count", "100000"], exit_codes.CONFIG, "--local-device-count=100000 must be <= 1024"),
    (["--coordinator-port", "99999999999999999999"], exit_codes.CONFIG,
     "--coordinator-port=99999999999999999999 is not a TCP port (1-65535)"),
    # no abbreviations: a flag means only what it spells, as jaxgen and the scripts read it
    (["--run-na", "x"], exit_codes.CONFIG, "unrecognized arguments: --run-na x"),
    (["--checkpoint-d=/x"], exit_codes.CONFIG, "unrecognized arguments: --checkpoint-d=/x"),
]


@pytest.mark.parametrize("args,code,message", CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_hostile_flag_is_one_line_and_its_exit_code(tmp_path, args, code, message):
    argv = [sys.executable, "-m", "trainer", "train", "--data-dir", str(tmp_path / "none"), "--no-download",
            "--checkpoint-dir", str(tmp_path / "ckpt"), *args]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert message in output.strip().splitlines()[-1], output
    assert "Traceback" not in output


def test_under_jaxgen_run_a_checkpoint_error_names_the_variable():
    """jaxgen run sets FROM_VARIABLES_ENV: the person set checkpoint.dir, not --checkpoint-dir."""
    argv = [sys.executable, "-m", "trainer", "train", "--no-download", "--checkpoint-dir", "/dev/null"]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", FROM_VARIABLES_ENV: "1"})
    assert proc.returncode == exit_codes.CHECKPOINT
    assert proc.stderr.strip().splitlines()[-1].endswith("error: checkpoint.dir /dev/null: not a directory")


def test_help_is_for_users_and_says_each_default_once():
    def help_of(*command: str) -> str:
        done = subprocess.run([sys.executable, "-m", "trainer", *command, "--help"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout

    description = " ".join(help_of().split("\n\n")[1].split())
    assert description.startswith("Train an MNIST classifier") and description.endswith(".")
    assert "argparse" not in description and "`" not in description
    for command in ("train", "evaluate", "predict", "query"):
        text = " ".join(help_of(command).split())
        assert not re.search(r"\(default: [^)]*\) \(default:", text), command


def test_fault_injection_flags_are_hidden_and_no_setting_of_the_run():
    import contextlib
    import dataclasses
    import io

    from trainer.cli import build_parser
    from trainer.config import TrainConfig
    from trainer.faults import Faults

    args = build_parser().parse_args(["train", "--fault-after-step", "45", "--stall-save-at-step", "8"])
    assert Faults.from_args(args) == Faults(fault_after_step=45, stall_save_at_step=8)
    assert Faults.from_args(args).stops() == (45,)
    names = {f.name for f in dataclasses.fields(Faults)}
    assert not names & {f.name for f in dataclasses.fields(TrainConfig)}
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    assert "--epochs" in shown.getvalue() and "after-step" not in shown.getvalue()


def test_a_command_that_is_not_distributed_names_no_rank(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer", "evaluate", "--model", str(tmp_path / "none")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == exit_codes.CONFIG
    assert proc.stderr.startswith("error: --model ") and "Rank" not in proc.stderr, proc.stderr


# predict and evaluate with hostile arguments, under an address space limit and a time bound.
MODEL_CASES = [
    (["predict", "--model", "/dev/zero", "/dev/zero"], exit_codes.CONFIG, "not an exported model"),
    (["predict", "--model", "{zero_config}", "x"], exit_codes.CONFIG, "config.json is larger than"),
    (["predict", "--model", "{model}", "/dev/zero"], exit_codes.DATA, "neither a PNG nor an IDX image file"),
    (["predict", "--model", "{model}", "/"], exit_codes.DATA, "/: cannot read"),
    (["predict", "--model", "{model}", "/nonexistent"], exit_codes.DATA, "cannot read"),
    (["predict", "--mod", "{model}", "x"], exit_codes.CONFIG, "the following arguments are required: --model"),
    (["predict", "--model", "", "x"], exit_codes.CONFIG, "argument --model: empty path"),
    (["predict", "--model", "{model}", "x", ""], exit_codes.CONFIG, "argument IMAGES: empty path"),
    (["evaluate", "--model", ""], exit_codes.CONFIG, "argument --model: empty path"),
    (["evaluate", "--model", "{model}", "--data-dir", "/tmp/" + "a" * 300, "--no-download"], exit_codes.CONFIG,
     "File name too long"),
    # what --data-dir holds is said, not skipped for another copy
    (["evaluate", "--model", "{model}", "--data-dir", "/dev/null", "--no-download"], exit_codes.DATA,
     "/dev/null: the data directory is not a directory"),
    (["evaluate", "--model", "{model}", "--data-dir", "{zero_data}", "--no-download"], exit_codes.DATA,
     "zero-data/t10k-images-idx3-ubyte.gz: not a file (the MNIST file t10k-images-idx3-ubyte.gz is expected there)"),
]


@pytest.mark.parametrize("args,code,message", MODEL_CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_predict_and_evaluate_answer_hostile_arguments_in_bounded_memory(tmp_path, args, code, message):
    from tests.trainer.test_inference_inputs import export_model, run

    model = export_model(tmp_path / "model")
    (tmp_path / "zero-config").mkdir()
    (tmp_path / "zero-config" / "config.json").symlink_to("/dev/zero")
    (tmp_path / "zero-data").mkdir()
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                 "t10k-labels-idx1-ubyte.gz"):
        (tmp_path / "zero-data" / name).symlink_to("/dev/zero")
    argv = [a.format(model=model, zero_config=tmp_path / "zero-config", zero_data=tmp_path / "zero-data") for a in args]
    proc = run(*argv, memory=1 << 30, timeout=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code and "Traceback" not in output, output[-2000:]
    assert message in output.strip().splitlines()[-1], output[-2000:]


@pytest.mark.parametrize("flags", [["--run-name", b"r\xfe"], ["--compilation-cache", b"/tmp/x\xfe"]],
                         ids=["run-name", "compilation-cache"])
def test_a_compilation_cache_path_that_is_not_utf8_is_one_line_before_anything_is_written(tmp_path, flags):
    """XLA's persistent cache takes only a UTF-8 path: a byte that is not ended in a TypeError traceback
    from jax at the first compilation, after the outputs directory was made."""
    import os

    argv = [sys.executable, "-m", "trainer", "train", "--data-dir", str(tmp_path / "none"), "--no-download",
            "--checkpoint-dir", str(tmp_path / "ckpt"), *[os.fsdecode(f) for f in flags]]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == exit_codes.CONFIG and "Traceback" not in output, output[-2000:]
    assert "is not a UTF-8 path (from " in output.strip().splitlines()[-1], output[-2000:]
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("args,message", [
    (["query", "--init-timeout", "0"], "--init-timeout 0 must be > 0"),
    (["allreduce", "--init-timeout", "-1"], "--init-timeout -1 must be > 0"),
    (["query", "--heartbeat-timeout", "0"], "--heartbeat-timeout 0 must be >= 1"),
    (["query", "--coordinator-address", ":::", "--num-processes", "2", "--process-id", "0"],
     "--coordinator-address=':::' must be HOST:PORT"),
], ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_query_and_allreduce_check_their_flags_as_train_does(args, message):
    """query and allreduce wait by the same timeouts as train: 0 or less was accepted (and with peers,
    a join deadline already past); a coordinator with no port said only its empty port ('')."""
    proc = subprocess.run([sys.executable, "-m", "trainer", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == exit_codes.CONFIG and "Traceback" not in output, output[-2000:]
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Rank ?: error: {message}"), output


def test_a_compilation_cache_that_is_a_file_is_refused_wherever_it_comes_from(tmp_path):
    """--compilation-cache, $JAX_COMPILATION_CACHE_DIR or <checkpoint-dir>/<run-name>/xla-cache naming
    a file: one config error saying which, before training (jax warned on every program instead)."""
    (tmp_path / "ckpt" / "run").mkdir(parents=True)
    (tmp_path / "ckpt" / "run" / "xla-cache").write_text("a file")
    base = [sys.executable, "-m", "trainer", "train", "--data-dir", str(tmp_path / "none"), "--no-download"]
    for extra, env, source in (([], {"JAX_COMPILATION_CACHE_DIR": "/dev/null"}, "$JAX_COMPILATION_CACHE_DIR"),
                               (["--checkpoint-dir", str(tmp_path / "ckpt"), "--run-name", "run"], {},
                                "--checkpoint-dir and --run-name")):
        proc = subprocess.run(base + extra, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", **env})
        output = proc.stdout + proc.stderr
        assert proc.returncode == exit_codes.CONFIG and "Traceback" not in output, output[-2000:]
        assert f"is not a directory (from {source})" in output.strip().splitlines()[-1], output[-2000:]



# Each way the trainer writes to standard output: its log, evaluate's and predict's results, its help.
OUTPUTS = {
    "log": ["query"],
    "help": ["--help"],
    "command help": ["query", "--help"],
    "evaluate": ["evaluate", "--model", "{model}", "--data-dir", "{mnist}", "--no-download"],
    "predict": ["predict", "--model", "{model}", "{image}"],
}


@pytest.mark.parametrize("output", OUTPUTS)
def test_standard_output_that_cannot_take_the_text_is_one_line_and_a_closed_pipe_is_no_error(tmp_path, output):
    """A full disk was a traceback (the log) or nothing at all and exit 0 (argparse's help); a closed pipe
    (`| head`) was a BrokenPipeError traceback: now the output goes nowhere and the command goes on."""
    import os

    from tests.support.paths import MNIST_DIR
    from tests.trainer.test_inference_inputs import export_model, png

    model, image = export_model(tmp_path / "model"), png(tmp_path / "d.png", 28, 28)
    args = [a.format(model=model, mnist=MNIST_DIR, image=image) for a in OUTPUTS[output]]

    def run(stdout):
        return subprocess.run([sys.executable, "-m", "trainer", *args], cwd=REPO_ROOT, stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})

    with open("/dev/full", "w") as full:
        unwritable = run(full)
    assert (unwritable.returncode, unwritable.stderr) == (1, "error: cannot write to standard output: No space left on "
                                                             "device\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        closed = run(write_end)
    finally:
        os.close(write_end)
    assert (closed.returncode, closed.stderr) == (0, "")


def _integer_flags() -> list[tuple[str, str, str]]:
    """(command, flag, a value it takes) for every integer flag of every command, hidden ones too: a
    flag whose default is an integer (or a list of them), or whose parser turns '1' into one."""
    from trainer.cli import build_parser

    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = []
    for command, sub in commands.choices.items():
        for action in sub._actions:
            default = action.default
            if not action.option_strings or action.type is None or isinstance(default, bool):
                continue
            if isinstance(default, tuple) and all(type(x) is int for x in default):
                found.append((command, action.option_strings[0], ",".join(map(str, default))))
            elif type(default) is int:
                found.append((command, action.option_strings[0], str(default)))
            elif default is None and type(_parsed(action.type, "1")) is int:
                found.append((command, action.option_strings[0], "1"))
    return found


def _parsed(kind, text):
    try:
        return kind(text)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return None


INTEGER_FLAGS = _integer_flags()
# int() takes each of these but the first and last; the last is past its limit on digits
NOT_INTEGERS = [lambda v: " " + v, lambda v: "+" + v, lambda v: v + "\n", lambda v: v[0] + "_" + v,
                lambda v: v.translate(str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")),
                lambda v: v.translate(str.maketrans("0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19")),
                lambda v: "9" * 5000]


def test_every_integer_flag_is_found():
    flags = {flag for _, flag, _ in INTEGER_FLAGS}
    assert {"--epochs", "--seed", "--metrics-port", "--heartbeat-timeout", "--mlp-hidden-sizes", "--fault-after-step",
            "--coordinator-port", "--num-processes", "--process-id", "--local-device-count"} <= flags


@pytest.mark.parametrize("command,flag,value", INTEGER_FLAGS, ids=lambda x: x if isinstance(x, str) else "")
def test_an_integer_flag_takes_only_ascii_digits(capsys, command, flag, value):
    """int() alone took ' 2', '+2', '1_0' and any Unicode digit ('\u0662', '\uff12'); each is now argparse's
    usage error naming the flag (exit 2), as a number past int()'s limit on digits is."""
    from trainer.cli import build_parser

    parser = build_parser()
    assert getattr(parser.parse_args([command, flag, value]), flag[2:].replace("-", "_")) is not None
    for spell in NOT_INTEGERS:
        hostile = spell(value)
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([command, flag, hostile])
        said = capsys.readouterr().err.strip().splitlines()
        assert exited.value.code == exit_codes.CONFIG == 2, (hostile, said)
        assert said[-1].startswith(f"{parser.prog} {command}: error: argument {flag}: "), said
        assert said[-1].endswith("is not an integer") or said[-1].endswith("list of integers"), said
