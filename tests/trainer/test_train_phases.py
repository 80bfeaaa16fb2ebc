"""The phases of trainer/train.py hand each other the training state as a value: a phase returns a
new one and cannot change the one it was given, nor the job or the services built once; each phase
stays short."""

import ast
import dataclasses
import inspect
import textwrap

import jax
import numpy as np
import pytest

from trainer import checkpoint, data, train
from trainer.checkpoint_writer import CheckpointWriter
from trainer.cluster import ClusterSpec
from trainer.config import TrainConfig
from trainer.faults import NO_FAULTS
from trainer.metrics import Logger, MetricsFile, Pace
from trainer.preemption import StopRequest
from trainer.watchdog import Watchdog

MAX_PHASE_LINES = 60


def _job_and_services(tmp_path, cfg: TrainConfig):
    """A real job of one process on this process's CPU devices: a small MLP, a strategy, 256 random
    examples; its checkpoints written under tmp_path."""
    spec = ClusterSpec(coordinator_address=None, num_processes=1, process_id=0)
    rng = np.random.default_rng(0)
    dataset = data.Dataset(rng.integers(0, 256, (256, 784), np.uint8), rng.integers(0, 10, 256).astype(np.int32),
                           rng.integers(0, 256, (64, 784), np.uint8), rng.integers(0, 10, 64).astype(np.int32))
    log = Logger(0)
    total = cfg.epochs * data.steps_per_epoch(len(dataset.train_labels), cfg.batch_size)
    strategy, state, _ = train._initial_state(cfg, spec, jax, jax.local_device_count(), total, log, {})
    job = train.Job(cfg, spec, jax, dataset, jax.local_device_count(), strategy,
                    strategy.put_data(dataset.train_images, dataset.train_labels), None, None,
                    total // cfg.epochs, total)
    writer = CheckpointWriter(tmp_path, cfg.fingerprint(), log)
    services = train.Services(log, writer, StopRequest(log), MetricsFile(None), (), None, Watchdog(0, log),
                              Pace(total, cfg.batch_size), None, NO_FAULTS)
    return job, services, train.TrainingState(state, 0, 0, 0, {})


def test_an_epoch_returns_a_new_training_state_and_leaves_the_given_one_as_it_was(tmp_path):
    cfg = TrainConfig(mlp_hidden_sizes=(16,), batch_size=32, epochs=2, log_every=4, checkpoint_every=3,
                      data_dir=str(tmp_path), download=False)
    job, services, before = _job_and_services(tmp_path, cfg)
    after, stopped = train._epoch(job, services, before, 0)
    services.writer.close()
    assert not stopped
    assert (before.step, before.saved_step, before.result) == (0, 0, {})
    assert (after.step, after.saved_step, after.start_step) == (8, 6, 0)  # checkpoints at steps 3 and 6
    assert after.state is not before.state
    assert after.result["event"] == "epoch" and after.result["step"] == 8
    assert checkpoint.list_steps(tmp_path) == [3, 6]


def _mutating_phase(value, field: str):
    """A phase that changes what it was given instead of returning a new value (the planted violation)."""
    setattr(value, field, getattr(value, field))


@pytest.mark.parametrize("kind, field", [(train.TrainingState, "step"), (train.TrainingState, "saved_step"),
                                         (train.Job, "total"), (train.Services, "writer")])
def test_a_phase_that_changes_the_state_or_a_bundle_in_place_fails(kind, field):
    value = kind(**{f.name: None for f in dataclasses.fields(kind)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        _mutating_phase(value, field)
    assert dataclasses.replace(value, **{field: 1}) is not value  # the way a phase moves on


def _long_functions(source: str) -> list[str]:
    return [f"{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > MAX_PHASE_LINES]


def test_every_phase_is_under_sixty_lines():
    assert _long_functions(inspect.getsource(train)) == []
    planted = "def phase(training):\n" + "".join(f"    training = step{i}(training)\n" for i in range(60))
    assert _long_functions(textwrap.dedent(planted)) == ["phase: 61 lines"]
