"""trainer/goodput.py's account on hand-made metrics records, where every second is known: each
second goes to one kind only, so the parts add up to the wall time even when the steps speed up
(a median step time times the steps kept once overran the wall by 0.7 s on a loaded machine)."""

import pytest

from trainer import goodput


def start(time, step, launched, **phases):
    return {"event": "start", "time": time, "step": step, "launched": launched, "phases": phases}


def step(time, n, epoch=1):
    return {"event": "step", "time": time, "step": n, "epoch": epoch}


# Attempt 1 (launched at 0): 2 s of start-up, steps 1-4 in 3 s (the first record holds the
# compilation), then steps that get ten times faster, a save at step 8 that blocks 0.5 s, and a
# crash after step 10 (the newest checkpoint: step 8). Attempt 2 launches at 20, resumes at 8 and
# finishes at 16 (epochs of 8 steps, scored in 1 s each).
RECORDS = [
    start(2.0, 0, 0.0, program_startup=1.5, accelerator_initialization=0.5),
    step(5.0, 4),                          # 4 steps at the ideal (0.5 s) + 1 s of compilation
    step(7.0, 8),                          # 0.5 s per step: slow
    {"event": "checkpoint", "time": 7.9, "step": 8, "started": 7.0, "blocked_seconds": 0.5},
    {"event": "epoch", "time": 8.0, "step": 8, "epoch": 1},  # 1 s: 0.5 blocked by the save, 0.5 scoring
    step(8.1, 10, 2),                      # steps 9-10 in 0.1 s: fast, and trained again later
    start(22.0, 8, 20.0, program_startup=1.0, unproductive_checkpoint_restore_time=1.0),
    step(22.6, 10, 2),                     # 2 steps at the ideal, the rest compilation
    step(23.0, 16, 2),
    {"event": "epoch", "time": 24.0, "step": 16, "epoch": 2},
    {"event": "end", "time": 24.5, "step": 16, "save_seconds": 0.25},
]


def test_each_second_goes_to_one_kind_and_the_parts_add_up_to_the_wall_time():
    account = goodput.account(RECORDS)
    lost = account["badput_seconds"]
    assert account["wall_seconds"] == 24.5
    parts = account["productive_seconds"] + sum(lost.values())
    assert parts == pytest.approx(24.5, abs=2e-3)
    assert account["steps_redone"] == 2  # steps 9 and 10
    assert lost["wasted_progress_from_disruption"] == pytest.approx(0.1)  # their measured time, not 2 × ideal
    assert lost["infrastructure_recovery_from_disruption"] == pytest.approx(20.0 - 8.1)
    assert lost["unproductive_checkpoint_save_time"] == pytest.approx(0.5 + 0.25)
    assert lost["evaluation"] == pytest.approx(0.5 + 1.0)
    assert lost["program_startup"] == pytest.approx(2.5)
    assert lost["unproductive_checkpoint_restore_time"] == pytest.approx(1.0)
    ideal = account["step_seconds"]
    assert lost["training_prep"] == pytest.approx((3.0 - 4 * ideal) + max(0.6 - 2 * ideal, 0.0))
    assert lost["other"] == pytest.approx(0.25)  # the half second to the end record, less its save


def test_steps_that_run_faster_than_the_median_never_make_the_parts_overrun_the_wall():
    # Most intervals slow, the most steps fast: the median rate times the steps would exceed the time.
    records = [start(1.0, 0, 0.0, program_startup=1.0), step(2.0, 1)]
    time = 2.0
    for n in range(2, 12):  # ten slow single steps of 0.1 s
        time += 0.1
        records.append(step(time, n))
    for n in range(21, 200, 10):  # eighteen chunks of 10 fast steps, 0.01 s each
        time += 0.1
        records.append(step(time, n))
    records.append({"event": "end", "time": time, "step": records[-1]["step"]})
    account = goodput.account(records)
    parts = account["productive_seconds"] + sum(account["badput_seconds"].values())
    assert parts == pytest.approx(account["wall_seconds"], abs=2e-3)
    assert account["badput_seconds"]["other"] == pytest.approx(0.0, abs=2e-3)


def test_the_steps_before_a_stop_are_productive_and_none_is_redone():
    # Stopped after step 7 (the last step record: 5); the stop saves step 7 and the next attempt resumes there.
    records = [start(1.0, 0, 0.0, program_startup=1.0), step(2.0, 1), step(3.0, 5),
               {"event": "checkpoint", "time": 3.6, "step": 7, "started": 3.5, "blocked_seconds": 0.1},
               {"event": "preempted", "time": 3.8, "step": 7, "save_seconds": 0.2},
               start(6.0, 7, 5.0, program_startup=1.0), step(7.0, 9), {"event": "end", "time": 7.0, "step": 9}]
    account = goodput.account(records)
    lost = account["badput_seconds"]
    assert account["steps_redone"] == 0 and lost["wasted_progress_from_disruption"] == 0
    assert lost["unproductive_checkpoint_save_time"] == pytest.approx(0.3)
    assert lost["infrastructure_recovery_from_disruption"] == pytest.approx(5.0 - 3.8)
    # Steps 6-7 took the 0.8 s to the stop's record less its 0.3 s of saves.
    assert account["productive_seconds"] + lost["training_prep"] == pytest.approx(1.0 + 1.0 + 0.5 + 1.0)
    assert account["productive_seconds"] + sum(lost.values()) == pytest.approx(7.0, abs=2e-3)


@pytest.mark.parametrize("back", [1.0, 12.0, 100.0])
def test_a_wall_clock_stepped_back_never_makes_the_goodput_above_1_or_the_wall_negative(back):
    # 10 s of steps measured, then the clock steps back `back` seconds before the end record.
    records = [start(2.0, 0, 0.0, program_startup=2.0), step(5.0, 4), step(10.0, 8), step(15.0, 12),
               {"event": "end", "time": 15.5 - back, "step": 12, "save_seconds": 0.0}]
    account = goodput.account(records)
    parts = account["productive_seconds"] + sum(account["badput_seconds"].values())
    assert 0.0 < account["goodput"] <= 1.0, account
    assert account["wall_seconds"] >= 0.0 and parts == pytest.approx(account["wall_seconds"], abs=2e-3), account
    assert all(seconds >= 0.0 for seconds in account["badput_seconds"].values()), account


def test_a_wall_clock_stepped_back_never_makes_the_run_s_wall_time_negative(monkeypatch):
    from trainer import results

    records = [start(1000.0, 0, 999.0), step(1005.0, 4), {"event": "end", "time": 900.0, "step": 4},
               start(950.0, 4, 949.0), step(960.0, 8)]
    monkeypatch.setattr(results.time, "time", lambda: 940.0)  # now: before the current attempt's start
    assert results._running_seconds(records) == 0.0


def test_the_account_reads_the_metrics_file_a_record_at_a_time_and_agrees_with_the_records(tmp_path):
    import json

    from trainer import results

    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" + "{}\n" for r in RECORDS))
    assert goodput.account(results.Records(path)) == goodput.account(RECORDS)
    assert goodput.account(results.Records(tmp_path / "none.jsonl")) is None


def test_the_account_of_a_huge_metrics_file_holds_none_of_its_records(tmp_path):
    import os
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    path = tmp_path / "metrics.jsonl"
    with open(path, "w") as f:  # 1.5 million step records, 60 MB
        f.write('{"event": "start", "time": 0.5, "step": 0, "launched": 0}\n')
        for n in range(1, 1_500_000):
            f.write(f'{{"event": "step", "time": {n}, "step": {n}, "epoch": 1}}\n')
    code = ("import sys; from trainer import goodput, results; "
            "print(goodput.account(results.Records(sys.argv[1]))['goodput'])")
    proc = subprocess.run(["prlimit", f"--as={512 << 20}", sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert 0.99 < float(proc.stdout) <= 1.0, proc.stdout
