"""`jaxgen run`: every run keeps its results in a folder of its own, a failed or refused rerun
touches none of the earlier ones, and two runs of one job never run at once."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from generator.runstore import runs
from tests.support.paths import EXAMPLES_DIR, MNIST_DIR
from tests.support.procs import kill, start, wait_all, wait_for_text
from trainer import exit_codes

CPU_LOCAL = str(EXAMPLES_DIR / "cpu-local.json")
SMALL = ["training.epochs=1", "training.train_examples=2048", "training.batch_size=64",
         "training.mlp.hidden_sizes={32}", "training.log_every=8", f"data.mirror={MNIST_DIR.as_uri()}/"]


def jaxgen_run(outputs, *sets: str, timeout: float = 300) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(outputs)]
    for item in (*SMALL, *sets):
        argv += ["--set", item]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, start_new_session=True)


def local_status(outputs) -> dict:
    """`jaxgen status --local` of the job, as JSON (`jaxgen list --local` shows the same)."""
    proc = subprocess.run([sys.executable, "-m", "generator", "status", "mnist-cpu", "--local", "--outputs",
                           str(outputs), "-o", "json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def job_runs(outputs) -> list:
    return runs.runs(outputs / "mnist-cpu")


def summary_of(run) -> dict:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_rerun_keeps_the_earlier_results_and_latest_names_the_newest(tmp_path):
    outputs = tmp_path / "outputs"
    first = jaxgen_run(outputs)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    [one] = job_runs(outputs)
    model = (one / "model" / "model.safetensors").read_bytes()
    # The checkpoints were in a scratch folder (an emptyDir in the render, the default): no log line points
    # into it, and none speaks of an emptyDir, which a process on this machine is not.
    saved = [line for line in first.stdout.splitlines() if "checkpoint saved at step" in line]
    assert saved and all("ckpt-0000000032.npz in this process's scratch folder, removed when the run ends" in line
                         for line in saved)
    assert "emptyDir" not in first.stdout + first.stderr
    scratch = re.search(r"scratch (\S+?),", first.stdout).group(1)
    assert not [line for line in saved if scratch in line]
    assert not [line for line in first.stdout.splitlines() if "Rank 0: outputs: " in line and scratch in line]
    assert os.readlink(outputs / "mnist-cpu" / "latest") == one.name  # relative: the folder can move

    second = jaxgen_run(outputs, "training.seed=1")  # other settings, same name
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    [still_one, two] = job_runs(outputs)
    assert still_one == one and (one / "model" / "model.safetensors").read_bytes() == model
    assert summary_of(one)["config"]["seed"] == 0 and summary_of(two)["config"]["seed"] == 1
    assert os.readlink(outputs / "mnist-cpu" / "latest") == two.name
    assert f"results of mnist-cpu kept in {two} (run {two.name}" in second.stdout
    assert f"  model:    {two / 'model' / 'model.safetensors'}" in second.stdout

    # The evaluate command it prints works as printed, in a shell in the folder jaxgen ran in, and
    # reads the data the run read (no download into an empty cache).
    [evaluate] = [line.split("evaluate: ", 1)[1] for line in second.stdout.splitlines() if "  evaluate: " in line]
    shell = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin",
             "JAXT_CACHE": str(tmp_path / "empty-cache")}
    scored = subprocess.run(["bash", "-c", evaluate], capture_output=True, text=True, timeout=120, env=shell)
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout.startswith(f"test accuracy={summary_of(two)['test_accuracy']:.4f} (")
    assert not (tmp_path / "empty-cache").exists()

    history = subprocess.run([sys.executable, "-m", "generator", "results", str(outputs / "mnist-cpu")],
                             capture_output=True, text=True, timeout=60)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert lines[1].startswith(f"  {one.name}  finished ") and f"{summary_of(one)['test_accuracy']:.4f}" in lines[1]
    assert lines[2].startswith(f"* {two.name}  finished ") and f"{summary_of(two)['test_accuracy']:.4f}" in lines[2]
    assert lines[3] == f"latest ({two.name}):"
    assert lines[4].startswith(f"result: test accuracy {summary_of(two)['test_accuracy']:.4f}")
    # The outputs folder holding the one job is enough, as before.
    assert subprocess.run([sys.executable, "-m", "generator", "results", str(outputs)], capture_output=True,
                          text=True, timeout=60).stdout == history.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_failed_or_refused_rerun_keeps_the_earlier_results_and_prints_none_of_them(tmp_path):
    outputs = tmp_path / "outputs"
    first = jaxgen_run(outputs, "persistence.enabled=true")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    [one] = job_runs(outputs)
    before = {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()}

    # A rerun that cannot get its data fails at start (exit 3)
    bad = jaxgen_run(outputs, "data.mirror=file:///no/such/mirror/", "training.seed=2")
    # and a rerun under other settings is refused by the claim's owner (exit 6).
    refused = jaxgen_run(outputs, "persistence.enabled=true", "training.seed=1")
    assert (bad.returncode, refused.returncode) == (exit_codes.DATA, exit_codes.CHECKPOINT), \
        bad.stdout[-2000:] + refused.stdout[-2000:]
    for proc in (bad, refused):
        assert "result:" not in proc.stdout and "resume:" not in proc.stdout, proc.stdout[-3000:]
        assert f"the results of earlier runs are untouched: the newest finished one is {one}" in proc.stdout
    # The refusal's advice works under jaxgen: it names what to change here, not trainer flags.
    assert "--checkpoint-dir" not in refused.stdout + refused.stderr
    assert "--set name=" in refused.stdout

    assert {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()} == before
    assert os.readlink(outputs / "mnist-cpu" / "latest") == one.name
    [_, failed, refused_run] = job_runs(outputs)
    assert runs.read_record(failed)["status"] == "failed" and runs.read_record(failed)["exit_code"] == 3
    newest = local_status(outputs)
    assert (newest["phase"], newest["results"]) == ("Failed", str(refused_run))
    assert newest["reason"] == f"exit code 6: {exit_codes.BY_NAME['checkpoint'].meaning}"
    assert not (refused_run / "summary.json").exists() and not (refused_run / "model").exists()

    # The advice the refusal gives works: another name runs.
    other = jaxgen_run(outputs, "persistence.enabled=true", "training.seed=1", "name=mnist-cpu-seed1")
    assert other.returncode == 0, other.stdout[-3000:] + other.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_rerun_of_a_finished_job_says_so_and_records_no_new_run(tmp_path):
    """The same command again on a finished job with persistence trains nothing: it says the job had
    already finished, its results unchanged, and how to train again (another name; more epochs with a
    constant schedule), and adds no run to the history (no restart, no new goodput); more epochs of a
    constant schedule then continue from its checkpoint, as said."""
    outputs = tmp_path / "outputs"
    first = jaxgen_run(outputs, "persistence.enabled=true")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    [one] = job_runs(outputs)
    before = {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()}
    claim = next((outputs / "claims").rglob("summary.json")).parent
    kept = {p.name: p.read_bytes() for p in (claim / "summary.json", claim / "metrics.jsonl")}

    again = jaxgen_run(outputs, "persistence.enabled=true")
    out = again.stdout
    assert again.returncode == 0, out[-3000:] + again.stderr
    assert "the job had already finished: its checkpoint is of step 32 of 32 (1 epoch); nothing was trained" in out
    assert (f"mnist-cpu had already finished: nothing was trained and its results are unchanged (the newest: {one}); "
            "no new run is recorded. To train it again, give it another name (--set name=NEW), which starts from "
            "step 0; more epochs (--set training.epochs=N) need another name too") in out, out[-3000:]
    assert "rerun the same command" not in out and "resume:" not in out
    assert job_runs(outputs) == [one] and os.readlink(outputs / "mnist-cpu" / "latest") == one.name
    assert {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()} == before
    assert {p.name: p.read_bytes() for p in (claim / "summary.json", claim / "metrics.jsonl")} == kept
    assert summary_of(one)["restarts"] == 0

    constant = ["persistence.enabled=true", "training.lr_schedule=constant", "name=mnist-constant"]
    assert jaxgen_run(outputs, *constant).returncode == 0
    said = jaxgen_run(outputs, *constant).stdout
    assert ("To train it again, give it another name (--set name=NEW), which starts from step 0, or more epochs "
            "(--set training.epochs=N), which continue from its last checkpoint") in said, said[-3000:]
    more = jaxgen_run(outputs, *constant, "training.epochs=2")
    assert more.returncode == 0 and "resuming from the checkpoint of step 32" in more.stdout, more.stdout[-3000:]
    assert summary_of(outputs / "mnist-constant" / "latest")["steps"] == 64


@pytest.mark.timeout(120)
def test_a_second_run_of_a_running_job_is_refused_at_once(tmp_path):
    outputs = tmp_path / "outputs"
    sleeper = json.dumps(["python3", "-c", "import time; print('sleeping', flush=True); time.sleep(60)"])
    argv = [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(outputs),
            "--set-json", f"program.command={sleeper}"]
    first = start(argv, tmp_path / "first.log")
    try:
        wait_for_text(first, "sleeping", 60)
        began = time.monotonic()
        second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - began
        during = local_status(outputs)  # the run that holds the lock, not an earlier one
    finally:
        kill(first)
    assert second.returncode == runs.BUSY
    assert took < 30  # at once: the first run's program sleeps 60 s (a loaded machine starts Python slowly)
    assert second.stdout == ""
    assert second.stderr.startswith("error: job 'mnist-cpu' is already running (jaxgen pid ")
    assert len(second.stderr.splitlines()) == 1 and "--set name=" in second.stderr
    assert (during["phase"], during["reason"]) == ("Running", "starting"), during
    # Once the first has ended, the job runs again.
    again = subprocess.run([*argv[:-1], 'program.command=["python3", "-c", "pass"]'], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    after = local_status(outputs)
    assert after["phase"] == "Succeeded" and after["results"] == str(job_runs(outputs)[-1]), after


def test_results_kept_before_runs_had_ids_become_a_run(tmp_path):
    folder = tmp_path / "outputs" / "mnist-cpu"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"test_accuracy": 0.97}))
    (folder / "run.json").write_text("{}")
    runs.adopt_unversioned(folder)
    [old] = runs.runs(folder)
    assert sorted(p.name for p in old.iterdir()) == ["jaxgen-run.json", "run.json", "summary.json"]
    assert runs.latest(folder) == old and sorted(p.name for p in folder.iterdir()) == [old.name, "latest"]


def test_latest_follows_nothing_but_a_run_of_its_folder(tmp_path):
    folder = tmp_path / "job"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.mkdir()
    os.symlink(str(elsewhere), folder / "latest")
    assert runs.latest(folder) is None
    (folder / "latest").unlink()
    os.symlink("../elsewhere", folder / "latest")
    assert runs.latest(folder) is None
    run_id = runs.new_run_id()
    (folder / run_id).mkdir()
    runs.set_latest(folder, run_id)
    assert runs.latest(folder) == folder / run_id


def test_a_fetched_cluster_run_is_kept_beside_the_earlier_runs(tmp_path):
    """scripts/run.sh hands what it copied from the claim to `jaxgen keep-run`: a run of its own."""
    folder = tmp_path / "results" / "job"
    for accuracy, exit_code in ((0.97, 0), (None, 1)):
        fetched = tmp_path / "results" / ".job.fetching"
        fetched.mkdir(parents=True)
        (fetched / "run.json").write_text("{}")
        if accuracy:
            (fetched / "summary.json").write_text(json.dumps(
                {"test_accuracy": accuracy, "train_accuracy": 0.9, "epochs": 1, "steps": 10, "wall_seconds": 2.0,
                 "examples_per_second": 100.0}))
        kept = subprocess.run([sys.executable, "-m", "generator", "keep-run", str(fetched), str(folder),
                               "--exit-code", str(exit_code)], capture_output=True, text=True, timeout=60)
        assert not fetched.exists()
    [good, failed] = runs.runs(folder)
    assert runs.latest(folder) == good and runs.read_record(failed)["status"] == "failed"
    assert kept.returncode == 1 and f"* {good.name}  finished" in kept.stdout
    header, first_row = kept.stdout.splitlines()[:2]
    assert header.index("status") == first_row.index("finished") and header.startswith("  run  "), kept.stdout
    assert f"  {failed.name}  failed (exit 1)" in kept.stdout and "result:" not in kept.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_stopped_emptydir_run_does_not_promise_a_resume(tmp_path):
    argv = [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(tmp_path / "outputs")]
    for item in (*SMALL, "training.epochs=100"):
        argv += ["--set", item]
    proc = start(argv, tmp_path / "run.log")
    try:
        wait_for_text(proc, "[mnist-cpu-0] Rank 0: epoch 2/100", 200)
        os.kill(proc.popen.pid, signal.SIGINT)
        codes = wait_all([proc], 120)
    finally:
        kill(proc)
    out = proc.output
    assert codes == [130], out[-3000:]
    assert "resumes here" not in out and "result:" not in out
    assert ("(preempted: its checkpoint is in this process's scratch folder, removed when the run ends, so a rerun "
            "starts over)") in out, out[-3000:]
    assert ("the checkpoints were in the processes' scratch folders, removed when the run ended: a rerun starts "
            "over") in out
    assert "emptyDir" not in out
    [stopped] = job_runs(tmp_path / "outputs")
    assert runs.read_record(stopped)["status"] == "stopped"
    status = local_status(tmp_path / "outputs")
    assert (status["phase"], status["reason"]) == ("Stopped", "no checkpoint outlived it (they were in the run's "
                                                   "scratch folders): a rerun starts over"), status


@pytest.mark.parametrize("record,expected", [
    ({"status": "failed", "exit_code": 3}, ("Failed", f"exit code 3: {exit_codes.BY_NAME['data'].meaning}")),
    ({"status": "stopped", "exit_code": 130, "checkpoints": None},
     ("Stopped", "no checkpoint outlived it (they were in the run's scratch folders): a rerun starts over")),
    ({"status": "stopped", "exit_code": 130, "checkpoints": "/claims/c/mnist-cpu/checkpoints"},
     ("Stopped", "a rerun resumes from its last checkpoint")),
    ({"status": "finished", "exit_code": 0}, ("Succeeded", "it left no summary (a program of its own)")),
    # an edited record: JSON's true was said as exit code 1's meaning
    ({"status": "failed", "exit_code": True}, ("Failed", "no exit code recorded")),
    ({"status": "failed", "exit_code": 10**30}, ("Failed", f"exit code {10**30}")),
])
def test_local_status_says_how_the_newest_kept_run_ended(tmp_path, record, expected):
    """What `jaxgen run` recorded (collect.finish), not an earlier run nor a resume it cannot keep."""
    folder = tmp_path / "outputs" / "mnist-cpu"
    older, newest = runs.new_run_id(time.time() - 60), runs.new_run_id()
    for run_id, ended in ((older, {"status": "finished", "exit_code": 0}), (newest, record)):
        (folder / run_id).mkdir(parents=True)
        runs.write_record(folder / run_id, {"run_id": run_id, "started": time.time() - 5, **ended})
    (folder / older / "summary.json").write_text(json.dumps({"test_accuracy": 0.97}))
    runs.set_latest(folder, older)
    if record["status"] == "stopped":
        (folder / newest / "metrics.jsonl").write_text('{"event": "preempted", "step": 5}\n')
    status = local_status(tmp_path / "outputs")
    assert (status["phase"], status["reason"]) == expected and status["results"] == str(folder / newest), status


def test_a_folder_named_with_other_digits_is_no_run(tmp_path):
    """A run id is ASCII digits, as new_run_id writes it: \\d also took '٢' (any Unicode digit),
    so a folder named with Arabic-Indic or fullwidth digits counted as a run and `latest`
    followed it; it is now a loose entry of the job folder, like any other."""
    folder = tmp_path / "job"
    folder.mkdir()
    run_id = runs.new_run_id(0)[:-4] + "abcd"  # its hex part has no digits to swap
    for digits in ("\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
                   "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19"):
        lookalike = run_id[:-6].translate(str.maketrans("0123456789", digits)) + run_id[-6:]
        (folder / lookalike).mkdir()
        runs.set_latest(folder, lookalike)
        assert runs.runs(folder) == [] and runs.latest(folder) is None
    (folder / run_id).mkdir()
    assert runs.runs(folder) == [folder / run_id]
