"""A hostile walk over jaxgen's command line: random commands, options and arguments drawn from a
vocabulary of bad paths, bad files and bad values. Whatever the input, jaxgen answers with its
documented exit codes (0; 1 only from `results` of an unfinished run; 2 for bad input) and never a
traceback: click's runner re-raises any exception jaxgen lets escape, failing the example.
`jaxgen run` is left out (it starts processes); tests/trainer/test_local_run.py covers its inputs."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from generator.cli import cli
from generator.targets import NAMES
from tests.support.paths import EXAMPLES_DIR
from tests.support.strategies import YAML_LOOKALIKES

# Files the walk creates in its scratch directory, each a kind of bad (or good) input.
FILES = {
    "seed.json": (EXAMPLES_DIR / "seed.json").read_text(),
    "empty.json": "",
    "binary.json": "\udcff\udcfe\x00",
    "list.yaml": "- a\n- b\n",
    "bomb.yaml": "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 8)),
    "deep.json": "[" * 3000 + "]" * 3000,
    "tabs.yaml": "a:\n\t- b\n",
    "metrics.jsonl": '{"event": "step", "step": 1, "loss": 0.5}\n{"event": ["x"]}\n',
    "dup.yaml": "a: 1\na: 2\ny: 1\ntrue: 2\n",
    "surrogate.json": '{"labels": {"a": "\\ud83d"}, "env": [{"name": "A", "value": "\\udcff"}]}',
    "huge.json": '{"training": {"seed": ' + "9" * 5000 + "}}",
    "huge.yaml": "hosts_count: " + "9" * 5000 + "\nname: 0x" + "f" * 5000 + "\n",
    "directive.yaml": "%YAML 1.2\n---\nname: x\n",
    "tags.yaml": "name: !!binary //79\nlabels: !!set {a, b}\ntraining: !custom {epochs: !!int x}\n",
    "merge.yaml": "training:\n  epochs: 1\n  <<: [{epochs: 7}, {epochs: 8}]\n  <<: 3\n",
    # outputs directories: a diverged run's, with what --metrics-file /dev/null leaves; one with odd records
    "diverged/run.json": "{}",
    "diverged/summary.json": '{"test_accuracy": 0.1, "loss": NaN, "epochs": 1, "steps": 3, "wall_seconds": null, '
                             '"examples_per_second": null, "restarts": 1, "resumed_from": 2}',
    "diverged/metrics.jsonl": '{"event": "step", "step": 1, "loss": NaN}\n{"event": "end"}\n',
    "odd/run.json": "{}",
    "odd/summary.json": "[1]",
    "odd/metrics.jsonl": '{"event": "end", "step": "x"}\n{"event": "preempted"}\n',
}
PATHS = [*FILES, "dir", "missing.json", "/dev/null", "/dev/zero", "/proc/nope/x", ".", "..", "dir/sub", "seed.json/x",
         "", "diverged", "odd"]
VALUES = [*(v for v in YAML_LOOKALIKES if "\x00" not in v), "hosts_count=0", "a=b", "x", "name=Bad_Name",
          "training.epochs=1e3", "env[0].name=A", "target=slurm", "l[70000]=1", "{", "a={x,", "a\\", "=", ",", "json",
          "yaml", *NAMES, '{"training": {"epochs": 2}}', "{", "[1]", "data.download=fal\u017fe",
          "training.seed=" + "9" * 30, "image.repository=trainer:v2", "resources.requests.memory=9Ei"]
# argv cannot hold a NUL; surrogates are left out because click's test runner cannot print them (the
# real command writes a non-UTF-8 file name with backslash escapes)
ARGV_TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
PATH = st.one_of(*[st.sampled_from(PATHS)] * 3, ARGV_TEXT)  # mostly the files the walk made
VALUE = st.one_of(*[st.sampled_from(VALUES)] * 3, ARGV_TEXT)
RENDER_OPTIONS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["-f", "-o"]), PATH),
    st.tuples(st.sampled_from(["--set", "--set-json", "--set-string", "--target", "--format", "-n"]), VALUE),
    st.tuples(st.sampled_from(["--release", "--help", "--bogus"])).map(list),
), max_size=4).map(lambda pairs: [token for pair in pairs for token in pair])


@st.composite
def invocation(draw) -> list[str]:
    """A command with arguments of the right shape (so the walk reaches jaxgen's code, not only
    click's usage errors) and hostile content."""
    command = draw(st.sampled_from(["render", "validate", "schema", "plot", "results"]))
    if command == "render":
        return ["render", *draw(st.lists(PATH, max_size=1)), *draw(RENDER_OPTIONS)]
    if command == "validate":
        return ["validate", *draw(st.lists(PATH, min_size=1, max_size=3))]
    if command == "plot":
        return ["plot", draw(PATH), *draw(st.lists(st.tuples(st.just("-o"), PATH), max_size=1).map(
            lambda pairs: [t for pair in pairs for t in pair]))]
    if command == "results":
        return ["results", draw(PATH)]
    return ["schema", *draw(st.lists(VALUE, max_size=1))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=invocation(), stdin=st.sampled_from(
    ["", "{}", "hosts_count: 0", "a: &a [1]\nb: *a", "\x00", json.dumps({"training": {"epochs": "x"}})]))
@pytest.mark.slow
def test_jaxgen_answers_hostile_input_without_a_traceback(tmp_path_factory, argv, stdin):
    runner = CliRunner()
    scratch = tmp_path_factory.mktemp("walk")
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        for directory in ("dir", "diverged", "odd"):
            os.mkdir(directory)
        for name, text in FILES.items():
            with open(name, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
        result = runner.invoke(cli, argv, input=stdin, catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code in (0, 1, 2), (argv, result.exit_code, result.output[-500:])
    assert result.exit_code != 1 or argv[0] == "results", (argv, result.output[-500:])
    assert "Traceback" not in result.output
    for line in result.stderr.splitlines():
        assert len(line) <= 1000, line[:200]


# The inputs that once cost memory or time without bound, each run as a child process under an address
# space limit: one line and exit 1 or 2 within the time, never MemoryError.
BOUNDED = [
    (["plot", "/dev/zero"], "a line of more than"),
    (["results", "zero-metrics"], "a line of more than"),
    (["results", "zero-summary"], "the run did not finish"),
    (["plot", "huge-number.jsonl"], "step record needs a number from 0"),
]


@pytest.mark.parametrize("argv,said", BOUNDED, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_jaxgen_reads_endless_or_huge_inputs_in_bounded_memory_and_time(tmp_path, argv, said):
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    for name in ("zero-metrics", "zero-summary"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    (tmp_path / "zero-metrics" / "metrics.jsonl").symlink_to("/dev/zero")
    (tmp_path / "zero-summary" / "summary.json").symlink_to("/dev/zero")
    (tmp_path / "huge-number.jsonl").write_text('{"event": "step", "step": 1' + "0" * 100_000 + "}\n")
    code = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "sys.argv[0] = 'jaxgen'; runpy.run_module('generator', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    output = proc.stdout + proc.stderr
    assert proc.returncode in (1, 2) and said in output and "Traceback" not in output, output[-2000:]
    assert len(output.strip().splitlines()) <= 2, output[-2000:]  # results: a note on the curves, then the verdict


# jaxgen run and the lifecycle scripts on hostile input, each a child under an address space limit
# (prlimit: the scripts' own children too) and a time bound: one error line, the documented code, no
# traceback, and nothing started.
LIFECYCLE = [
    (["jaxgen", "run", "/dev/zero"], 2, "/dev/zero: larger than 3 MiB"),
    (["jaxgen", "run", "bomb.yaml"], 2, "excessive aliasing"),
    (["jaxgen", "run", "{cpu_local}", "--outputs", "/dev/null"], 2, "cannot keep the job's results there"),
    (["jaxgen", "run", "{cpu_local}", "--work-dir", "/dev/zero"], 2, "--work-dir /dev/zero: cannot hold the scratch"),
    (["jaxgen", "run", "{cpu_local}", "--outputs", "loop/x"], 2, "--outputs loop/x: cannot keep the job's results"),
    (["jaxgen", "run", "{cpu_local}", "--work-dir", "bomb.yaml/x"], 2, "cannot hold the scratch directory"),
    (["jaxgen", "run", "{cpu_local}", "--set-json", 'program.args=["--metrics-file=/var/x"]'], 2,
     "--metrics-file /var/x is on none of the pod's volumes"),
    (["jaxgen", "run", "{cpu_local}", "--set", "hosts_count=100000"], 2, "global device count 100000"),
    (["prepare.sh", "/dev/zero", "-o", "build"], 2, "/dev/zero: larger than 3 MiB"),
    (["prepare.sh", "bomb.yaml", "-o", "build"], 2, "excessive aliasing"),
    (["run.sh", "/dev/zero"], 2, "/dev/zero: no such build folder"),
    (["run.sh", "."], 2, "release.env not found"),
    (["clean.sh", "/dev/zero"], 2, "release.env not found"),
]


@pytest.mark.parametrize("argv,code,said", LIFECYCLE, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_jaxgen_run_and_the_lifecycle_scripts_answer_hostile_input_in_bounded_memory_and_time(tmp_path, argv, code,
                                                                                              said):
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT, SCRIPTS_DIR

    (tmp_path / "bomb.yaml").write_text(FILES["bomb.yaml"])
    (tmp_path / "loop").symlink_to("loop")  # a symlink loop: resolving it raised RuntimeError
    command = ([sys.executable, "-m", "generator", *argv[1:]] if argv[0] == "jaxgen"
               else ["bash", str(SCRIPTS_DIR / argv[0]), *argv[1:]])
    command = [a.format(cpu_local=EXAMPLES_DIR / "cpu-local.json") for a in command]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "KUBECONFIG": "/nonexistent"}
    proc = subprocess.run(["prlimit", f"--as={2 << 30}", *command], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code and "Traceback" not in output, output[-2000:]
    errors = [line for line in output.splitlines() if "error" in line]
    assert len(errors) == 1 and said in output, output[-2000:]
    assert "started" not in output and not (tmp_path / "build").exists(), output[-2000:]


# Every option or argument that names a path of jaxgen's own (not the variables files): '' was the
# current folder to pathlib (`run --outputs ""` kept its results in the cwd, `plot -o ""` failed
# naming '.').
EMPTY_PATHS = [
    (["plot", ""], "'METRICS'"),
    (["plot", "metrics.jsonl", "-o", ""], "'-o' / '--output'"),
    (["results", ""], "'DIRECTORY'"),
    (["results", "s3://bucket/prefix/job", "--into", ""], "'--into'"),
    (["list", "--local", "--outputs", ""], "'--outputs'"),
    (["status", "demo", "--local", "--outputs", ""], "'--outputs'"),
    (["logs", "demo", "--local", "--outputs", ""], "'--outputs'"),
    (["run", str(EXAMPLES_DIR / "cpu-local.json"), "--outputs", ""], "'--outputs'"),
    (["run", str(EXAMPLES_DIR / "cpu-local.json"), "--work-dir", ""], "'--work-dir'"),
]


@pytest.mark.parametrize("argv,option", EMPTY_PATHS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_an_empty_path_is_a_usage_error_naming_its_option(tmp_path, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"event": "step", "step": 1, "loss": 1}\n')
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 2 and f"Invalid value for {option}: empty path" in result.stderr, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # nothing written, nothing started


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["defaults"], ["schema"], ["render"], ["--help"],
                                  ["list", "--local", "--outputs", "."]], ids=" ".join)
def test_a_full_standard_output_is_one_line_and_exit_1(tmp_path, argv):
    """`jaxgen defaults > file` on a full disk: one line saying the output cannot be written, exit 1,
    not an OSError traceback (nor a second complaint when the interpreter flushes at exit)."""
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "generator", *argv], cwd=tmp_path, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("warning: ")]
    assert errors == ["error: cannot write to standard output: No space left on device"], proc.stderr[-2000:]


LONG = "/tmp/" + "a" * 300  # a name over 255 bytes: looking it up raises, where a missing file is only False


@pytest.mark.parametrize("argv", [["plot", LONG], ["results", LONG], ["list", "--local", "--outputs", LONG],
                                  ["status", "demo", "--local", "--outputs", LONG], ["render", "-o", LONG],
                                  ["validate", LONG], ["run", "--outputs", LONG]], ids=lambda argv: argv[0])
def test_a_path_too_long_to_look_up_is_one_line(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    errors = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
    assert result.exit_code == 2 and len(errors) == 1 and "File name too long" in errors[0], result.output[-2000:]


@pytest.mark.parametrize("argv,said", [
    (["results", "/dev/zero"], "error: /dev/zero: not a directory"),
    (["results", "file"], "error: file: not a directory"),
    (["results", "absent"], "error: absent: no such directory"),
    (["list", "--local", "--outputs", "/dev/zero"], "error: --outputs /dev/zero: not a directory"),
    (["status", "x", "--local", "--outputs", "absent"], "error: --outputs absent: no such directory"),
], ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_folder_argument_that_is_a_file_or_device_is_said_as_not_a_directory(tmp_path, monkeypatch, argv, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 2 and result.stderr.startswith(said), result.stderr


def _integer_options() -> list[tuple[list[str], str]]:
    """(the command's words, its option) for every integer option of every jaxgen command, hidden ones too."""
    import click

    found = []
    for name, command in sorted(cli.commands.items()):
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.types.IntParamType):
                found.append(([name], param.opts[-1]))
    return found


INTEGER_OPTIONS = _integer_options()


def test_every_integer_option_is_found():
    assert {option for _, option in INTEGER_OPTIONS} == {"--rank", "--exit-code"}


@pytest.mark.parametrize("command,option", INTEGER_OPTIONS, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
@pytest.mark.parametrize("value", [" 2", "+2", "2\n", "1_0", "\u0662", "\uff12", "9" * 5000],
                         ids=["space", "plus", "newline", "underscore", "arabic-indic", "fullwidth", "5000-digits"])
def test_an_integer_option_takes_only_ascii_digits(tmp_path, command, option, value):
    """click's int took ' 2', '+2', '1_0' and any Unicode digit ('\u0662', '\uff12'), and a number past
    int()'s limit on digits ended in a traceback; each is now a usage error naming the option (exit 2),
    before the command does anything."""
    [subcommand] = command
    arguments = [str(tmp_path)] * sum(1 for p in cli.commands[subcommand].params if p.param_type_name == "argument")
    result = CliRunner().invoke(cli, [*command, *arguments, option, value], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}': " in result.stderr and "is not an integer" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


# Names a job or its bucket chose, printed by jaxgen: an escape sequence in one (here: clear the screen,
# set the window title, recolour) reaches the terminal escaped, never raw.
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b[31m\u202e"


def _assert_escaped(output: str) -> None:
    assert not any(c in output for c in "\x1b\x07\u202e"), repr(output[-2000:])
    assert "\\x1b[2J\\x1b]0;owned\\x07\\x1b[31m\\u202e" in output, output[-2000:]


def test_results_print_a_run_s_names_and_fields_escaped(tmp_path):
    run = tmp_path / f"run{ESCAPES}"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "summary.json").write_text(json.dumps({"test_accuracy": 0.5, "restarts": ESCAPES,
                                                  "resumed_from": [ESCAPES]}))
    result = CliRunner().invoke(cli, ["results", str(run)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    _assert_escaped(result.output)


def test_status_and_list_local_print_a_run_folder_s_name_escaped(tmp_path):
    (tmp_path / f"job{ESCAPES}").mkdir()
    (tmp_path / f"job{ESCAPES}" / "metrics.jsonl").write_text('{"event": "start", "step": 0, "total_steps": 4, '
                                                              '"time": 1}\n')
    listed = CliRunner().invoke(cli, ["list", "--local", "--outputs", str(tmp_path)], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    _assert_escaped(listed.output)


def test_what_a_results_copy_left_out_is_named_escaped(tmp_path):
    import io
    import subprocess
    import sys
    import tarfile

    from tests.support.paths import REPO_ROOT

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member = tarfile.TarInfo(f"curves{ESCAPES}.png")
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(member)
    log = tmp_path / "pod.err"
    log.write_text(f"dropped: model{ESCAPES} (symlink)\n")
    extract = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "extract", str(tmp_path / "dest"),
                              "--pod-log", str(log)], input=buffer.getvalue(), capture_output=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert extract.returncode == 0, extract.stderr
    said = extract.stderr.decode()
    _assert_escaped(said)
    assert said.count("\n") == 1 and said.startswith("not copied") and f"curves{ESCAPES}.png" not in said, said


# Every reader of a run's metrics.jsonl streams it: a 60 MB file of `{}` lines (20 million records that
# say nothing), read as a child under a 2 GB address space limit, is read a line at a time.
HUGE_METRICS = [
    (["results", "job/run"], 1, "the run did not finish"),
    (["status", "run", "--local", "--outputs", "job"], 0, "phase:"),
    (["list", "--local", "--outputs", "job"], 0, "run"),
    (["plot", "job/run/metrics.jsonl", "-o", "x.png"], 2, "no step or epoch records to plot"),
]


@pytest.fixture(scope="module")
def huge_metrics(tmp_path_factory):
    folder = tmp_path_factory.mktemp("huge")
    (folder / "job" / "run").mkdir(parents=True)
    (folder / "job" / "run" / "run.json").write_text('{"name": "run"}')
    with open(folder / "job" / "run" / "metrics.jsonl", "w") as f:
        line = "{}\n" * (1 << 16)
        for _ in range((60 << 20) // len(line)):
            f.write(line)
    return folder


@pytest.mark.parametrize("argv,code,said", HUGE_METRICS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_every_reader_of_a_run_s_metrics_streams_them_in_bounded_memory(huge_metrics, argv, code, said):
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    if argv[0] == "plot":
        pytest.importorskip("matplotlib")
    proc = subprocess.run(["prlimit", f"--as={2 << 30}", sys.executable, "-m", "generator", *argv], cwd=huge_metrics,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    output = proc.stdout + proc.stderr
    assert proc.returncode == code and said in output and "Traceback" not in output, output[-2000:]
    assert "MemoryError" not in output, output[-2000:]


def test_a_clock_stepped_back_between_two_runs_never_shows_the_older_as_the_job_s_state(tmp_path, monkeypatch):
    from generator.runstore import runs

    kept = []
    for now, status, code in ((2_000_000_000.0, "finished", 0), (1_900_000_000.0, "failed", 3)):  # then 27 h back
        source = tmp_path / status
        source.mkdir()
        (source / "run.json").write_text('{"name": "job"}')
        if code == 0:
            (source / "summary.json").write_text('{"test_accuracy": 0.5}')
        monkeypatch.setattr(runs.time, "time", lambda: now)
        kept.append(runs.keep(source, tmp_path / "job", status, code))
    monkeypatch.undo()
    assert kept[1].name < kept[0].name  # the newer run's id reads older
    runs.write_record(kept[1], {**runs.read_record(kept[1]), "wall_seconds": -3600.0})  # measured across the step
    shown = CliRunner().invoke(cli, ["status", "job", "--local", "--outputs", str(tmp_path)], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "phase:      Failed" in shown.output and f"results:    {kept[1]}" in shown.output, shown.output
    history = CliRunner().invoke(cli, ["results", str(tmp_path / "job")], catch_exceptions=False)
    rows = [line for line in history.output.splitlines() if kept[0].name in line or kept[1].name in line]
    assert [kept[0].name in rows[0], kept[1].name in rows[1]] == [True, True], history.output
    assert rows[1].endswith(" 0.0 s") and "-3600" not in history.output, history.output


@pytest.mark.parametrize("command", [["status", "job"], ["list"]])
def test_status_and_list_json_is_strict_json_when_the_loss_diverged(tmp_path, command):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "run.json").write_text('{"name": "job"}')
    (tmp_path / "job" / "metrics.jsonl").write_text(
        '{"event": "start", "step": 0, "total_steps": 8, "time": 1}\n'
        '{"event": "step", "step": 4, "epoch": 1, "loss": NaN, "time": 2}\n'
        '{"event": "epoch", "step": 8, "epoch": 1, "loss": Infinity, "test_accuracy": 0.1, "time": 3}\n')
    shown = CliRunner().invoke(cli, [*command, "--local", "--outputs", str(tmp_path), "-o", "json"],
                               catch_exceptions=False)
    assert shown.exit_code == 0, shown.output

    def no_constant(name):
        raise AssertionError(f"{name} is not JSON: {shown.output}")

    found = json.loads(shown.output, parse_constant=no_constant)
    job = found if isinstance(found, dict) else found[0]
    assert job["name"] == "job" and job.get("loss") is None and job["test_accuracy"] == 0.1, job


def test_the_pod_s_list_of_what_it_left_out_is_read_in_bounded_memory(tmp_path):
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    log = tmp_path / "pod.err"
    with open(log, "w") as f:
        f.write("dropped: " + "x" * (100 << 20) + " (symlink)\n")  # one line of 100 MB: no name, skipped
        for n in range(200_000):
            f.write(f"dropped: link-{n} (symlink)\n")
        f.write("dropped: last (symlink)")  # the log's end, without its newline
    extract = subprocess.run(["prlimit", f"--as={1 << 30}", sys.executable, "-m", "generator.runstore.confined", "extract",
                              str(tmp_path / "dest"), "--pod-log", str(log)], input=b"\0" * 10240, capture_output=True,
                             timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    said = extract.stderr.decode()
    assert extract.returncode == 0 and "Traceback" not in said and said.count("\n") == 1, said[-2000:]
    assert said.startswith("not copied (only regular files and folders are): link-0 (symlink), link-1 (symlink)")
    assert said.endswith(", link-9 (symlink) and 199991 more\n"), said[-200:]  # 200,001 named, the last too


def test_an_error_naming_a_job_s_file_prints_it_escaped(tmp_path):
    metrics = tmp_path / f"run{ESCAPES}" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text("not json\n")
    result = CliRunner().invoke(cli, ["plot", str(metrics), "-o", str(tmp_path / "x.png")], catch_exceptions=False)
    assert result.exit_code == 2 and "not a JSON line" in result.output, result.output
    _assert_escaped(result.output)


def test_a_clock_stepped_back_during_a_local_run_never_makes_its_wall_time_negative(tmp_path, monkeypatch):
    import time

    from generator.engines.kubernetes.local import collect
    from generator.engines.kubernetes.local.plan import LocalJob, ProcessPlan
    from generator.runstore import intake, runs

    plan = ProcessPlan(0, "job-0", ["python"], {})
    started = time.time()
    record = intake.RunRecord(tmp_path / "outputs" / "job", runs.new_run_id(started), started)
    record.folder.mkdir(parents=True)
    monkeypatch.setattr(intake.time, "time", lambda: started - 3600)  # the clock steps back an hour
    job = LocalJob([plan], tmp_path / "scratch", outputs_dir=tmp_path / "claims" / "job")
    collect.finish(job, "job", record, 1, lambda line: None)
    monkeypatch.undo()
    assert 0.0 <= runs.read_record(record.path)["wall_seconds"] < 60


def test_the_pod_side_copy_names_what_it_left_out_one_line_each_as_printable_shows_it(tmp_path):
    import subprocess
    import sys

    from generator.runstore import confined
    from generator.errors import printable
    from tests.support.paths import REPO_ROOT

    name = f"curves\n{ESCAPES}.png"  # a newline would have split the pod's list, its second half printed raw
    (tmp_path / "outputs" / "job").mkdir(parents=True)
    (tmp_path / "outputs" / "job" / name).symlink_to("/etc/passwd")
    log = tmp_path / "pod.err"
    with open(log, "w") as err:
        archive = subprocess.run([sys.executable, "-c", confined.PACK, str(tmp_path / "outputs" / "job")],
                                 stdout=subprocess.PIPE, stderr=err, check=True, timeout=60).stdout
    assert log.read_text() == f"{confined.DROPPED}{printable(name)} (symlink)\n"
    extract = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "extract", str(tmp_path / "dest"),
                              "--pod-log", str(log)], input=archive, capture_output=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    said = extract.stderr.decode()
    _assert_escaped(said)
    assert said == f"not copied (only regular files and folders are): {printable(name)} (symlink)\n", said


def test_keep_run_prints_the_job_folder_escaped(tmp_path):
    (tmp_path / "part").mkdir()
    kept = CliRunner().invoke(cli, ["keep-run", str(tmp_path / "part"), str(tmp_path / f"job{ESCAPES}"),
                                    "--exit-code", "3"], catch_exceptions=False)
    assert kept.exit_code == 1 and "the run failed with exit code 3" in kept.output, kept.output
    _assert_escaped(kept.output)
