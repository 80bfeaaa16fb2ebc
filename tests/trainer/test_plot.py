"""`jaxgen plot`: draws a real PNG from a metrics file; bad files give a clear error."""

import json
import os
import subprocess
import sys

from tests.support.paths import REPO_ROOT


def jaxgen(*args):
    return subprocess.run([sys.executable, "-m", "generator", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)


def test_plot_writes_a_png(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    lines = [{"event": "start", "step": 0}]
    for epoch in (1, 2):
        lines += [{"event": "step", "epoch": epoch, "step": epoch * 10 + s, "loss": 1.0 / (epoch + s)} for s in range(3)]
        lines.append({"event": "epoch", "epoch": epoch, "step": epoch * 10 + 2, "loss": 0.5 / epoch,
                      "train_accuracy": 0.9 + epoch / 100, "test_accuracy": 0.9 + epoch / 50})
    metrics.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    proc = jaxgen("plot", str(metrics), "-o", str(tmp_path / "curves.png"))
    assert proc.returncode == 0, proc.stderr
    png = (tmp_path / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_plot_rejects_a_file_that_is_not_jsonl(tmp_path):
    bad = tmp_path / "metrics.jsonl"
    bad.write_text('{"event": "step", "step": 1, "loss": 1}\nnot json\n')
    proc = jaxgen("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 2
    assert f"{bad}:2: not a JSON line" in proc.stderr
    assert not (tmp_path / "x.png").exists()


import pytest  # noqa: E402

GOOD_STEP = '{"event": "step", "step": 1, "loss": 1}\n'


@pytest.mark.parametrize("content,message", [
    (b"\xff\xfe\x00binary", "cannot read"),
    (b"5\n", ":1: not a metrics record"),
    (GOOD_STEP.encode() + b'{"event": "step", "step": 2}\n', ":2: step record needs a number in 'loss'"),
    (b'{"event": "epoch", "epoch": 1, "step": 2, "loss": "x", "train_accuracy": 1, "test_accuracy": 1}\n',
     ":1: epoch record needs a number in 'loss'"),
    (b"[" * 100000 + b"]" * 100000 + b"\n", ":1: not a JSON line"),
    (b'{"event": ["step"], "step": 1}\n', ":1: not a metrics record ('event' must be a string)"),
    (b'{"event": {"a": 1}}\n', ":1: not a metrics record ('event' must be a string)"),
    (b'{"event": "step", "step": 1e308, "loss": 1}\n', ":1: step record needs a number from 0 to 9007199254740992"),
    (b'{"event": "step", "step": 1' + b"0" * 400 + b', "loss": 1}\n', ":1: step record needs a number from 0"),
    (b'{"event": "step", "step": 1' + b"0" * 5000 + b', "loss": 1}\n', ":1: step record needs a number from 0"),
    (b'{"event": "epoch", "epoch": -' + b"9" * 4301 + b', "step": 1, "loss": 1, "train_accuracy": 1, '
     b'"test_accuracy": 1}\n', ":1: epoch record needs a number from 0"),
    (b'{"event": "step", "step": 1.5, "loss": 1}\n', ":1: step record needs a whole number in 'step'"),
    (b'{"event": "step", "step": 1, "loss": 1e308}\n', ":1: step record needs a number from -1e+300 to 1e+300"),
    (b'{"event": "step", "step": 1' + b"0" * 5000 + b', "loss": 1}\n', ":1: step record needs a number from 0"),
    (b"0" * (3 << 20), ":1: a line of more than 1048576 characters"),
    (b'{"event": "epoch", "epoch": 1, "step": 1, "loss": 1, "train_accuracy": 1e308, "test_accuracy": 0}\n',
     ":1: epoch record needs a number from 0 to 1 in 'train_accuracy'"),
])
def test_plot_rejects_bad_records_in_one_line(tmp_path, content, message):
    bad = tmp_path / "metrics.jsonl"
    bad.write_bytes(content)
    proc = jaxgen("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_diverged_run_is_drawn_and_said(tmp_path, token):
    """A loss that became NaN or infinite is what a diverged run writes (JSON's tokens)."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(GOOD_STEP + f'{{"event": "step", "step": 2, "loss": {token}}}\n'
                       f'{{"event": "epoch", "epoch": 1, "step": 2, "loss": {token}, "train_accuracy": 0.1, '
                       '"test_accuracy": 0.098}\n')
    proc = jaxgen("plot", str(metrics), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "note: the run diverged: its loss is not finite from step 2 on" in proc.stdout
    assert (tmp_path / "x.png").read_bytes().startswith(b"\x89PNG")


def test_plot_of_dev_zero_is_one_line_in_bounded_memory():
    proc = subprocess.run([sys.executable, "-c", "import resource, runpy, sys; "
                           "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
                           "sys.argv = ['jaxgen', 'plot', '/dev/zero']; runpy.run_module('generator', run_name='__main__')"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "a line of more than" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("output,message", [("curves.unknownformat", "cannot write"), ("file/x.png", "cannot write")])
def test_plot_output_problems_are_one_line(tmp_path, output, message):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(GOOD_STEP)
    (tmp_path / "file").write_text("a file, not a directory")
    proc = jaxgen("plot", str(metrics), "-o", str(tmp_path / output))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_plot_refuses_to_replace_a_fifo_or_device_at_its_output(tmp_path):
    """-o naming a FIFO (as /dev/null names a device) is one line and exit 2; the FIFO stays a FIFO
    (a rename over it would have replaced /dev/null itself for root)."""
    import stat

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(GOOD_STEP)
    fifo = tmp_path / "curves.png"
    os.mkfifo(fifo)
    proc = jaxgen("plot", str(metrics), "-o", str(fifo))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == f"error: {fifo}: cannot write: not a regular file (fifo): left as it is"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_jaxgen_does_not_import_jax_or_matplotlib_at_start():
    code = "import sys, generator.cli; sys.exit(int(any(m in sys.modules for m in ('jax', 'matplotlib'))))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, timeout=60).returncode == 0


from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

NUMBERS = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2))
RECORD = st.fixed_dictionaries(
    {}, optional={"event": st.one_of(st.sampled_from(["step", "epoch", "start", "end"]), NUMBERS),
                  "step": NUMBERS, "epoch": NUMBERS, "loss": NUMBERS, "train_accuracy": NUMBERS,
                  "test_accuracy": NUMBERS})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(RECORD, min_size=1, max_size=4))
def test_any_records_plot_or_are_one_user_error(tmp_path, records):
    import json

    from generator.errors import UserError
    from generator.plot import draw, read_records

    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        draw(read_records(path), tmp_path / "x.png", "fuzz")
    except UserError as e:
        assert "\n" not in str(e) and len(str(e)) < 300


def test_a_folder_name_that_is_not_utf8_is_drawn_as_its_escape(tmp_path):
    """The run's folder names the plot; its bytes may not be UTF-8 (Python passes them as surrogates)."""
    run = tmp_path / os.fsdecode(b"run-\xff")
    run.mkdir()
    (run / "metrics.jsonl").write_text(GOOD_STEP)
    proc = subprocess.run([sys.executable, "-m", "generator", "results", os.fsencode(run)], cwd=REPO_ROOT,
                          capture_output=True, timeout=120)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"the run did not finish" in proc.stdout and (run / "curves.png").read_bytes().startswith(b"\x89PNG")
