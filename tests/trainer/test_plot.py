"""`jaxgen plot`: draws a real PNG from a metrics file; bad files give a clear error."""

import json
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
])
def test_plot_rejects_bad_records_in_one_line(tmp_path, content, message):
    bad = tmp_path / "metrics.jsonl"
    bad.write_bytes(content)
    proc = jaxgen("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("output,message", [("curves.unknownformat", "cannot write"), ("file/x.png", "cannot write")])
def test_plot_output_problems_are_one_line(tmp_path, output, message):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(GOOD_STEP)
    (tmp_path / "file").write_text("a file, not a directory")
    proc = jaxgen("plot", str(metrics), "-o", str(tmp_path / output))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_jaxgen_does_not_import_jax_or_matplotlib_at_start():
    code = "import sys, generator.cli; sys.exit(int(any(m in sys.modules for m in ('jax', 'matplotlib'))))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, timeout=60).returncode == 0
