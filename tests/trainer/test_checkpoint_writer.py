"""The background checkpoint writer: one write in flight, errors raised on the caller's thread,
nothing left behind on close (trainer/checkpoint_writer.py)."""

import re
import threading

import numpy as np
import pytest

from trainer import checkpoint, exit_codes
from trainer.checkpoint_writer import CheckpointWriter
from trainer.errors import CheckpointError

pytestmark = pytest.mark.timeout(60)

FINGERPRINT = {"model": "test"}
LEAVES = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)]
NAMES = ["[0]['w']", "[0]['b']"]


class Records:
    """A MetricsFile and a Logger that keep what they are given."""

    def __init__(self):
        self.records, self.lines = [], []

    def write(self, record: dict) -> None:
        self.records.append(record)

    def __call__(self, line: str) -> None:
        self.lines.append(line)


class Gate:
    """A before_rename hook that holds the write of `step` until released."""

    def __init__(self, step: int):
        self.step, self.entered, self.release = step, threading.Event(), threading.Event()

    def __call__(self, step: int) -> None:
        if step == self.step:
            self.entered.set()
            assert self.release.wait(30)


def writer_for(directory, hook=None) -> tuple[CheckpointWriter, Records]:
    out = Records()
    return CheckpointWriter(directory, FINGERPRINT, out, metrics=out, before_rename=hook), out


def save(writer: CheckpointWriter, step: int) -> None:
    writer.submit(step, LEAVES, NAMES, writer.begin())


def in_thread(function) -> threading.Thread:
    thread = threading.Thread(target=function, daemon=True)
    thread.start()
    return thread


def test_a_save_waits_for_the_write_in_flight_and_each_is_reported_once(tmp_path):
    gate = Gate(1)
    writer, out = writer_for(tmp_path, gate)
    save(writer, 1)
    assert gate.entered.wait(30)
    writer.poll()  # the write is held: nothing to report yet, and poll does not wait for it
    assert out.lines == [] and checkpoint.list_steps(tmp_path) == []
    second = in_thread(lambda: save(writer, 2))
    second.join(0.3)
    assert second.is_alive()  # held behind the first write: one in flight at most
    gate.release.set()
    second.join(30)
    assert not second.is_alive()
    writer.close()
    assert checkpoint.list_steps(tmp_path) == [1, 2]
    assert [r["step"] for r in out.records] == [1, 2] and all(r["event"] == "checkpoint" for r in out.records)
    assert out.records[1]["waited_seconds"] > 0 and out.records[1]["blocked_seconds"] >= out.records[1]["waited_seconds"]
    for step, line in zip((1, 2), out.lines, strict=True):
        path = checkpoint.path_of(tmp_path, step)
        assert re.fullmatch(rf"checkpoint saved at step {step}: {re.escape(str(path))} \(\d+\.\d\d s\); the step "
                            r"loop was blocked \d+\.\d{3} s, the write took \d+\.\d\d s", line), line
    step, leaves = checkpoint.load_latest(tmp_path, FINGERPRINT)
    assert step == 2 and all(np.array_equal(a, b) for a, b in zip(leaves, LEAVES, strict=True))


def test_close_waits_for_the_write_in_flight(tmp_path):
    gate = Gate(5)
    writer, out = writer_for(tmp_path, gate)
    save(writer, 5)
    assert gate.entered.wait(30)
    closing = in_thread(writer.close)
    closing.join(0.3)
    assert closing.is_alive() and checkpoint.list_steps(tmp_path) == []
    gate.release.set()
    closing.join(30)
    assert not closing.is_alive() and checkpoint.list_steps(tmp_path) == [5] and len(out.lines) == 1


def not_a_directory(tmp_path):
    """A checkpoint directory every write to fails (mkdir: File exists)."""
    path = tmp_path / "file"
    path.write_text("")
    return path


def test_a_failed_write_is_raised_on_the_next_call_once(tmp_path):
    not_a_dir = not_a_directory(tmp_path)
    writer, out = writer_for(not_a_dir)
    save(writer, 3)
    with pytest.raises(CheckpointError, match=rf"cannot write the checkpoint of step 3 to {not_a_dir}: ") as raised:
        writer.wait()
    assert raised.value.exit_code == exit_codes.CHECKPOINT and "\n" not in str(raised.value)
    assert out.lines == [] and out.records == []
    writer.poll()  # reported: not raised again
    writer.close()


def test_an_error_is_not_lost_when_the_writer_is_closed_or_a_save_begins(tmp_path):
    not_a_dir = not_a_directory(tmp_path)
    writer, _ = writer_for(not_a_dir)
    save(writer, 3)
    with pytest.raises(CheckpointError):
        writer.close()
    writer, _ = writer_for(not_a_dir)
    save(writer, 3)
    with pytest.raises(CheckpointError):
        writer.begin()
    writer.close()


def test_abandon_logs_the_error_of_the_write_in_flight_instead_of_raising_it(tmp_path):
    writer, out = writer_for(not_a_directory(tmp_path))
    save(writer, 4)
    writer.abandon()
    assert len(out.lines) == 1 and out.lines[0].startswith("the checkpoint write in flight failed too: cannot write")


def test_abandon_leaves_a_hung_write_behind_after_its_timeout(tmp_path):
    gate = Gate(6)
    writer, out = writer_for(tmp_path, gate)
    save(writer, 6)
    assert gate.entered.wait(30)
    writer.abandon(timeout=0.2)
    assert out.lines == ["the checkpoint write of step 6 did not finish in 0 s; leaving it (the previous "
                         "checkpoint is intact)"]
    gate.release.set()


def test_without_a_directory_nothing_is_written(tmp_path):
    writer, out = writer_for(None)
    save(writer, 1)
    writer.close()
    assert out.lines == [] and out.records == [] and list(tmp_path.iterdir()) == []


def test_a_temporary_file_left_by_a_killed_write_is_never_loaded_and_removed_by_the_next_save(tmp_path):
    checkpoint.save(tmp_path, 1, LEAVES, FINGERPRINT, NAMES)
    stale = tmp_path / f"{checkpoint.TEMP_PREFIX}killed{checkpoint.TEMP_SUFFIX}"
    stale.write_bytes(b"PK\x03\x04 half a zip")
    assert checkpoint.list_steps(tmp_path) == [1] and checkpoint.load_latest(tmp_path, FINGERPRINT)[0] == 1
    checkpoint.save(tmp_path, 2, LEAVES, FINGERPRINT, NAMES)
    assert not stale.exists() and checkpoint.list_steps(tmp_path) == [1, 2]


def test_a_host_copy_of_the_state_survives_the_next_donating_steps():
    """The writer reads the state's host copy while the next steps run; on the CPU that copy is a view
    of the device buffers (trainer/train.py's _save), which a step donating them must not overwrite."""
    import jax

    from trainer.strategies import _replica

    step = jax.pmap(lambda x: x + 1, donate_argnums=0)
    state = step(np.zeros((1, 1000), np.float32))
    host = _replica(state)
    for _ in range(3):
        state = step(state)
    assert np.all(_replica(state) == 4) and np.all(host == 1)
