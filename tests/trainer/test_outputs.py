"""A job's outputs directory: what a finished run leaves, the model's use, and every way writing or
reading it can fail ending in one line with the checkpoint exit code."""

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

from tests.support.paths import MNIST_DIR
from tests.support.procs import (checkpoints_of, latest_checkpoint, outputs_of, small_train_args, start, trainer_argv,
                                 wait_all)
from trainer import data, exit_codes

pytestmark = pytest.mark.timeout(300)


def one_line_error(proc, code: int, text: str) -> None:
    assert wait_all([proc], 120) == [code], proc.output[-2000:]
    assert "Traceback" not in proc.output, proc.output[-2000:]
    errors = [line for line in proc.output.splitlines() if "error:" in line]
    assert len(errors) == 1 and text in errors[0], errors


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The outputs of one small finished run."""
    root = tmp_path_factory.mktemp("finished")
    proc = start(trainer_argv(*small_train_args(root)), root / "train.log", {data.DECODED_DATA_ENV: None})
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    return outputs_of(root), proc.output


@pytest.mark.slow
def test_a_finished_run_leaves_its_model_summary_and_metrics(finished):
    outputs, log = finished
    assert sorted(p.name for p in outputs.iterdir()) == [
        "checkpoints", "decoded-data", "metrics.jsonl", "model", "run.json", "summary.json", "xla-cache"]
    # the four MNIST files decoded, for a restart to map (named by their sha256)
    assert sorted(p.stem for p in (outputs / "decoded-data").iterdir()) == sorted(h for _, h in data.FILES.values())
    assert sorted(p.name for p in (outputs / "model").iterdir()) == ["README.md", "config.json", "model.safetensors"]
    summary = json.loads((outputs / "summary.json").read_text())
    assert summary["steps"] == 32 and summary["restarts"] == 0 and summary["config"]["mlp_hidden_sizes"] == [64, 64]
    assert f"Rank 0: result: test accuracy {summary['test_accuracy']:.4f}, train accuracy" in log
    from safetensors.numpy import load_file

    params = load_file(str(outputs / "model" / "model.safetensors"))  # parameters only, named by layer
    assert {k: v.shape for k, v in params.items()} == {
        "w0": (784, 64), "b0": (64,), "w1": (64, 64), "b1": (64,), "w2": (64, 10), "b2": (10,)}


@pytest.mark.slow
def test_evaluate_prints_the_accuracy_the_training_ended_with(finished):
    outputs, _ = finished
    summary = json.loads((outputs / "summary.json").read_text())
    done = subprocess.run(trainer_argv("evaluate", "--model", str(outputs / "model" / "model.safetensors"),
                                       "--data-dir", str(MNIST_DIR), "--no-download"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"test accuracy={summary['test_accuracy']:.4f} (")


@pytest.mark.slow
def test_predict_classifies_an_idx_file_and_pngs(finished, tmp_path):
    from PIL import Image

    from trainer.data import parse_idx

    outputs, _ = finished
    images = parse_idx(MNIST_DIR / "t10k-images-idx3-ubyte.gz")[:3]
    pngs = []
    for i, image in enumerate(images):
        pngs.append(tmp_path / f"digit-{i}.png")
        Image.fromarray(image).save(pngs[-1])
    done = subprocess.run(trainer_argv("predict", "--model", str(outputs / "model"),
                                       str(MNIST_DIR / "t10k-images-idx3-ubyte.gz"), *map(str, pngs)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 10000 + 3
    by_idx = [line.split(": ")[1].split()[0] for line in lines[:3]]
    by_png = [line.split(": ")[1].split()[0] for line in lines[-3:]]
    assert by_idx == by_png and lines[-1].startswith(f"{pngs[-1]}: ")
    bad = subprocess.run(trainer_argv("predict", "--model", str(outputs / "model"), str(outputs / "summary.json")),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == exit_codes.DATA and bad.stderr.strip().endswith("neither a PNG nor an IDX image file")


@pytest.mark.slow
def test_a_rerun_of_the_finished_job_resumes_at_its_end_and_keeps_its_result(finished, tmp_path):
    """The finished job again trains nothing, says so and how to train again, and leaves its outputs
    as they were (no start or end record: no restart counted, the summary unchanged)."""
    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    kept = {p.name: p.read_bytes() for p in (outputs_of(copy) / "summary.json", outputs_of(copy) / "metrics.jsonl")}
    before = json.loads(kept["summary.json"])
    proc = start(trainer_argv(*small_train_args(copy)), tmp_path / "rerun.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    assert "resuming from the checkpoint of step 32" in proc.output
    assert (f"the job had already finished: its checkpoint is of step 32 of 32 (1 epoch); nothing was trained and "
            f"its results in {outputs_of(copy)} are unchanged. To train it again, give it another name (--run-name)"
            ) in proc.output, proc.output[-2000:]
    assert f"result: test accuracy {before['test_accuracy']:.4f}" in proc.output and "(as before)" in proc.output
    assert {p.name: p.read_bytes() for p in (outputs_of(copy) / "summary.json",
                                             outputs_of(copy) / "metrics.jsonl")} == kept


@pytest.mark.slow
def test_a_rerun_of_a_job_that_ended_before_it_published_publishes(finished, tmp_path):
    """A job whose last checkpoint is its end but whose summary is missing (it ended before publishing)
    is finished by the rerun: it scores the restored model and writes the summary."""
    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    before = json.loads((outputs / "summary.json").read_text())
    (outputs_of(copy) / "summary.json").unlink()
    proc = start(trainer_argv(*small_train_args(copy)), tmp_path / "rerun.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    assert "already finished" not in proc.output
    after = json.loads((outputs_of(copy) / "summary.json").read_text())
    assert after["test_accuracy"] == before["test_accuracy"] and after["resumed_from"] == [32]


@pytest.mark.slow
def test_a_job_of_another_configuration_is_refused_and_the_first_keeps_its_results(finished, tmp_path):
    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    kept = {p: p.read_bytes() for p in outputs_of(copy).rglob("*") if p.is_file() and "xla-cache" not in p.parts}
    proc = start(trainer_argv(*small_train_args(copy, "--learning-rate", "0.05")), tmp_path / "second.log")
    one_line_error(proc, exit_codes.CHECKPOINT, "with other settings (learning_rate 0.1 there, 0.05 now)")
    assert {p: p.read_bytes() for p in kept} == kept


@pytest.mark.slow
@pytest.mark.parametrize("flags,said", [
    (["--precision", "bfloat16"], "precision 'float32' there, 'bfloat16' now"),
    (["--strategy", "sharded"], "strategy 'pmap' there, 'sharded' now"),
    (["--allreduce-dtype", "bfloat16"], "allreduce_dtype 'float32' there, 'bfloat16' now"),
])
def test_a_rerun_in_another_precision_or_strategy_cannot_relabel_the_model(finished, tmp_path, flags, said):
    """The card and the summary say how the weights were computed: a resume may not change it."""
    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    card = (outputs_of(copy) / "model" / "README.md").read_text()
    proc = start(trainer_argv(*small_train_args(copy, *flags)), tmp_path / "rerun.log")
    one_line_error(proc, exit_codes.CHECKPOINT, said)
    assert (outputs_of(copy) / "model" / "README.md").read_text() == card and "| float32 (parameters" in card


@pytest.mark.slow
def test_a_run_without_a_metrics_file_reports_its_result_without_made_up_figures(tmp_path):
    from tests.support.jaxgen import jaxgen

    proc = start(trainer_argv(*small_train_args(tmp_path, "--metrics-file", "/dev/null")), tmp_path / "train.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    [result] = [line for line in proc.output.splitlines() if "Rank 0: result:" in line]
    assert result.endswith("after 1 epoch (32 steps)") and "nan" not in result, result
    summary = json.loads((outputs_of(tmp_path) / "summary.json").read_text())
    assert summary["wall_seconds"] is None and summary["examples_per_second"] is None
    shown = jaxgen("results", str(outputs_of(tmp_path)))
    assert shown.exit_code == 0 and shown.stdout.startswith(f"result: test accuracy {summary['test_accuracy']:.4f}")


@pytest.mark.slow
def test_a_rerun_reads_past_foreign_lines_in_the_metrics_file(finished, tmp_path):
    """Lines another tool or an edit left in metrics.jsonl are not the trainer's records: its summary,
    goodput account and result are made of the records it wrote."""
    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    foreign = ['{"event": "epoch", "seconds": "x", "batches": "y"}', '{"event": "start", "step": "abc", "time": "t"}',
               '{"event": "start", "step": [1], "time": 1e308}', '{"event": "step", "step": 1e400, "time": -1e308}',
               '{"event": "start", "step": 3, "time": 5, "phases": {"a": "b"}}', "[" * 100000]
    with open(outputs_of(copy) / "metrics.jsonl", "ab") as f:
        f.write("\n".join(foreign).encode() + b"\n\xff\xfe not UTF-8\n")
    (outputs_of(copy) / "summary.json").unlink()  # not yet published: the rerun accounts the records again
    proc = start(trainer_argv(*small_train_args(copy)), tmp_path / "rerun.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    assert "Traceback" not in proc.output and "Rank 0: result: test accuracy" in proc.output, proc.output[-2000:]
    summary = json.loads((outputs_of(copy) / "summary.json").read_text())
    assert summary["restarts"] == 1 and summary["resumed_from"] == [32], summary


@pytest.mark.slow
def test_a_metrics_file_that_is_no_file_is_not_read(tmp_path):
    """/dev/zero takes every write and has no end: the run neither reads it whole nor reports figures from it."""
    proc = start(["prlimit", f"--as={4 << 30}", *trainer_argv(*small_train_args(tmp_path, "--metrics-file", "/dev/zero"))],
                 tmp_path / "train.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    [result] = [line for line in proc.output.splitlines() if "Rank 0: result:" in line]
    assert result.endswith("after 1 epoch (32 steps)"), result


@pytest.mark.slow
def test_a_foreign_checkpoint_is_one_line(tmp_path):
    checkpoints_of(tmp_path).mkdir(parents=True)
    np.savez(checkpoints_of(tmp_path) / "ckpt-0000000008.npz", weights=np.zeros(3))
    proc = start(trainer_argv(*small_train_args(tmp_path)), tmp_path / "train.log")
    one_line_error(proc, exit_codes.CHECKPOINT, "ckpt-0000000008.npz: unreadable checkpoint")


def _one_fewer(leaves: dict) -> dict:  # a leaf fewer, the count written to match
    return dict(list(leaves.items())[:-1])


def _one_more(leaves: dict) -> dict:
    return {**leaves, "extra": np.zeros(3, np.float32)}


def _reshaped(leaves: dict) -> dict:
    name = next(iter(leaves))
    return {**leaves, name: np.zeros(leaves[name].size + 1, np.float32)}


def _strings(leaves: dict) -> dict:
    name = next(iter(leaves))
    return {**leaves, name: np.full(leaves[name].shape, "x")}


def _renamed(leaves: dict) -> dict:
    return {f"other{i}": leaf for i, leaf in enumerate(leaves.values())}


@pytest.mark.slow
@pytest.mark.parametrize("change,message", [
    (_one_fewer, "arrays, the state has"),
    (_one_more, "arrays, the state has"),
    (_reshaped, "shape ("),
    (_strings, "dtype <U1"),
    (_renamed, "array 0 is 'other0'"),
    (None, "unreadable checkpoint"),
], ids=["one-leaf-fewer", "one-leaf-more", "another-shape", "another-dtype", "other-names", "truncated"])
def test_a_checkpoint_that_does_not_fit_the_state_is_one_line(finished, tmp_path, change, message):
    """Written by this trainer's own checkpoint code with the right fingerprint, yet not this state."""
    from trainer import checkpoint

    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    directory = checkpoints_of(copy)
    latest = checkpoint.path_of(directory, checkpoint.list_steps(directory)[-1])
    if change is None:
        latest.write_bytes(latest.read_bytes()[:1000])
    else:
        meta, leaves = checkpoint.read(latest)
        changed = change(leaves)
        checkpoint.save(directory, meta["step"], list(changed.values()), meta["fingerprint"], list(changed))
    proc = start(trainer_argv(*small_train_args(copy)), tmp_path / "rerun.log")
    one_line_error(proc, exit_codes.CHECKPOINT, message)


@pytest.mark.slow
@pytest.mark.parametrize("field,value,message", [
    ("step", "abc", "its step 'abc' is not a step number"),
    ("step", 2**40, "it holds step 1099511627776, its name says 32"),
    ("names", {"w0": 0}, "its array names are not a list of names"),
    ("num_leaves", -1, "its array count '-1' is not a count"),
], ids=["step-not-a-number", "step-not-its-name", "names-not-a-list", "count-negative"])
def test_a_checkpoint_whose_metadata_lies_is_one_line(finished, tmp_path, field, value, message):
    """The arrays are the state's, the fingerprint matches, and one field of the metadata is odd."""
    from trainer import checkpoint

    outputs, _ = finished
    copy = tmp_path / "c"
    shutil.copytree(outputs.parent, copy, ignore=shutil.ignore_patterns("train.log"))
    latest = latest_checkpoint(copy)
    with np.load(latest) as z:
        arrays = dict(z)
    meta = {**json.loads(bytes(arrays.pop("__meta__")).decode()), field: value}
    with open(latest, "wb") as f:
        np.savez(f, __meta__=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    proc = start(trainer_argv(*small_train_args(copy)), tmp_path / "rerun.log")
    one_line_error(proc, exit_codes.CHECKPOINT, f"unreadable checkpoint ({message})")
    assert checkpoint.list_steps(checkpoints_of(copy)) == [32]


def in_a_mount(tmp_path, options: str, *extra: str):
    """The small run with its checkpoint dir on a fresh tmpfs (a mount namespace of its own)."""
    target = tmp_path / "mnt"
    target.mkdir()
    script = (f"mount -t tmpfs -o {options} tmpfs {target} && exec "
              + " ".join(map(repr, trainer_argv(*small_train_args(target, *extra)))))
    return start(["unshare", "--mount", "sh", "-c", script], tmp_path / "train.log")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) and root")
def test_a_full_volume_is_one_line(tmp_path):
    # 300 KiB: the metrics and run.json fit, the first checkpoint (about 460 KB) does not.
    proc = in_a_mount(tmp_path, "size=300k", "--compilation-cache", "", "--checkpoint-every", "8")
    one_line_error(proc, exit_codes.CHECKPOINT, "cannot write the checkpoint of step 8 to ")
    assert proc.output.splitlines()[-1].endswith("No space left on device")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) and root")
def test_a_read_only_volume_is_one_line(tmp_path):
    proc = in_a_mount(tmp_path, "ro,size=1m")
    one_line_error(proc, exit_codes.CHECKPOINT, "cannot write checkpoints there: Read-only file system")


@pytest.mark.slow
def test_progress_is_logged_by_process_0_only(tmp_path):
    from tests.support.procs import run_cluster

    procs = run_cluster(tmp_path, "two", lambda rank: trainer_argv(*small_train_args(tmp_path / "c")), 2, 1, 180)
    assert "batch 8/32" in procs[0].output and "result: test accuracy" in procs[0].output
    assert "batch 8/32" not in procs[1].output and "result:" not in procs[1].output
    assert "Rank 1: cluster:" in procs[1].output  # its start
    assert "Rank 1: training completed." in procs[1].output  # and its end: every process confirms it


def test_the_results_guide_shows_the_snippet_the_model_card_carries():
    from tests.support.paths import REPO_ROOT
    from trainer import export

    assert f"```python\n{export.load_snippet('mlp')}```" in (REPO_ROOT / "docs" / "results.md").read_text()


def test_the_docs_print_the_one_evaluate_command_the_summary_and_the_card_print():
    """trainer/outputs.py's evaluate_command and predict_command, wherever a user reads one."""
    import re

    from tests.support.paths import REPO_ROOT
    from trainer.outputs import evaluate_command, predict_command

    pages = [REPO_ROOT / "README.md", REPO_ROOT / "trainer" / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
    for command in ("evaluate", "predict"):
        prefix = {"evaluate": evaluate_command, "predict": predict_command}[command]("M").split(" M")[0]
        said = [(page.name, m) for page in pages for m in re.findall(rf"(?:python3? -m )?[\w.-]+ {command} --model",
                                                                       page.read_text())]
        assert said and all(m == prefix for _, m in said), said


@pytest.mark.slow
def test_evaluate_finds_the_data_its_run_read_without_a_download(finished, tmp_path):
    """small_train_args trains on MNIST_DIR: evaluate finds it there, with no --data-dir and no way
    to download (the mirror does not exist, the cache is empty)."""
    outputs, _ = finished
    summary = json.loads((outputs / "summary.json").read_text())
    env = {**os.environ, "JAXT_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run(trainer_argv("evaluate", "--model", str(outputs / "model"), "--mirror",
                                       (tmp_path / "no-mirror").as_uri() + "/"),
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"test accuracy={summary['test_accuracy']:.4f} (")
    assert not (tmp_path / "empty-cache").exists()  # nothing downloaded


@pytest.mark.slow
def test_evaluate_reads_the_cache_then_names_data_dir_and_mirror_when_offline(finished, tmp_path):
    outputs, _ = finished
    model = tmp_path / "elsewhere" / "model"
    shutil.copytree(outputs / "model", model)  # no summary beside it: no run's data to find
    cache = tmp_path / "cache"
    (cache / "mnist").mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):  # the test set is all it reads
        shutil.copy(MNIST_DIR / name, cache / "mnist" / name)
    offline = (tmp_path / "no-mirror").as_uri() + "/"
    cached = subprocess.run(trainer_argv("evaluate", "--model", str(model), "--mirror", offline),
                            capture_output=True, text=True, timeout=120, env={**os.environ, "JAXT_CACHE": str(cache)})
    assert cached.returncode == 0 and cached.stdout.startswith("test accuracy="), cached.stderr
    failed = subprocess.run(trainer_argv("evaluate", "--model", str(model), "--mirror", offline),
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "JAXT_CACHE": str(tmp_path / "empty")})
    assert failed.returncode == exit_codes.DATA and "Traceback" not in failed.stderr
    [line] = failed.stderr.splitlines()[-1:]
    assert line.startswith("error: cannot download ") and "--mirror" in line and "--data-dir" in line, failed.stderr
    # The last resort downloads the test set alone, into the cache.
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(MNIST_DIR)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fetched = subprocess.run(trainer_argv("evaluate", "--model", str(model), "--mirror",
                                              f"http://127.0.0.1:{server.server_port}/"),
                                 capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "JAXT_CACHE": str(tmp_path / "fresh")})
    finally:
        server.shutdown()
    assert fetched.returncode == 0 and fetched.stdout == cached.stdout, fetched.stderr
    assert sorted(p.name for p in (tmp_path / "fresh" / "mnist").iterdir()) == [
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


@pytest.mark.parametrize("created", ['"yesterday"', "null", "1e300", "-1e300", "NaN", "true", "[1]", "1" + "0" * 30])
def test_an_odd_created_in_another_jobs_run_record_is_the_refusal_line(tmp_path, created):
    from trainer import ownership
    from trainer.errors import CheckpointError

    (tmp_path / "run.json").write_text(f'{{"name": "other", "fingerprint": {{"seed": 1}}, "created": {created}}}')
    with pytest.raises(CheckpointError) as refused:
        ownership.claim(tmp_path, "mine", {"seed": 0})
    assert "holds the outputs of job 'other' (started " in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("record,said", [
    (json.dumps({"name": "o\n" * 3000, "fingerprint": {"seed": 1, "k\n" * 5000: "v\n" * 4000,
                                                    **{f"a{i}": i for i in range(20)}}}), "and 17 more)"),
    ("[" * 100000, "unreadable (maximum recursion depth exceeded"),
    ("/dev/zero", "unreadable (larger than 1048576 bytes)"),
], ids=["long-names-and-many-differences", "deep", "endless"])
def test_another_jobs_odd_run_record_is_one_short_line_in_bounded_memory(tmp_path, record, said):
    import sys

    from tests.support.paths import REPO_ROOT

    if record.startswith("/"):
        (tmp_path / "run.json").symlink_to(record)
    else:
        (tmp_path / "run.json").write_text(record)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from trainer import ownership; from trainer.errors import CheckpointError\n"
            "try: ownership.claim(sys.argv[1], 'mine', {'seed': 0})\n"
            "except CheckpointError as e: print(e)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    [line] = done.stdout.splitlines()
    assert said in line and len(line) < 1000, line[:2000]


@pytest.mark.slow
def test_a_diverged_run_is_a_result_that_says_so_and_its_model_predicts_nothing(tmp_path):
    from tests.support.jaxgen import jaxgen
    from tests.trainer.test_inference_inputs import png, run

    proc = start(trainer_argv(*small_train_args(tmp_path, "--learning-rate", "1e30")), tmp_path / "train.log")
    assert wait_all([proc], 120) == [0], proc.output[-2000:]
    assert "; diverged: the loss is nan" in proc.output
    shown = jaxgen("results", str(outputs_of(tmp_path)))
    assert shown.exit_code == 0 and "; diverged: the loss is nan" in shown.stdout.splitlines()[0]
    refused = run("predict", "--model", outputs_of(tmp_path) / "model", png(tmp_path / "digit.png", 28, 28))
    assert refused.returncode == exit_codes.CONFIG and "holds NaN or infinite values" in refused.stderr, refused.stderr


def test_a_checkpoint_file_named_with_other_digits_is_no_step(tmp_path):
    """A checkpoint's step is ten ASCII digits: \\d also took '٣' (and int() read it as 3), so a file
    ckpt-000000000٣.npz was the newest checkpoint, step 3, to the resume and to jaxgen status."""
    from trainer import checkpoint, outputs

    folder = tmp_path / outputs.CHECKPOINTS
    folder.mkdir()
    for name in ("ckpt-000000000\u0663.npz", "ckpt-000000000\uff13.npz", "ckpt-\u0660\u0660\u0660\u0660\u0660"
                 "\u0660\u0660\u0660\u0660\u0669.npz"):
        (folder / name).write_bytes(b"")
    assert outputs.newest_checkpoint(tmp_path) is None and checkpoint.list_steps(folder) == []
    (folder / "ckpt-0000000002.npz").write_bytes(b"")
    assert outputs.newest_checkpoint(tmp_path)[0] == 2 and checkpoint.list_steps(folder) == [2]


def test_the_exported_model_file_has_the_mode_of_its_siblings(tmp_path):
    """model.safetensors gets the mode config.json and README.md get (0644 under umask 022, 0640 under
    027), where safetensors wrote it 0600 and so no one else could read the result."""
    from trainer import export
    from trainer.config import TrainConfig
    from trainer.models.mlp import network

    cfg = TrainConfig(mlp_hidden_sizes=(16,))
    for mask, mode in ((0o022, 0o644), (0o027, 0o640)):
        old = os.umask(mask)
        try:
            model = export.save(tmp_path / oct(mask), network.init_params(0, cfg.model_settings()), cfg,
                                {"test_accuracy": 0.1, "steps": 1})
        finally:
            os.umask(old)
        modes = {p.name: p.stat().st_mode & 0o777 for p in model.parent.iterdir()}
        assert modes == {"model.safetensors": mode, "config.json": mode, "README.md": mode}, modes
