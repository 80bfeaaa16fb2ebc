"""Requirement: the defaults (5 epochs, batch 128, sgd lr 0.1 momentum 0.9) reach >= 98.0% on MNIST,
in float32 and in bfloat16."""

import json

import pytest

from tests.support.paths import MNIST_DIR
from tests.trainer.procs import run_cluster, trainer_argv


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_defaults_reach_98_percent_test_accuracy(tmp_path, precision):
    ckpt = tmp_path / "ckpt"
    procs = run_cluster(tmp_path, "defaults",
                        lambda rank: trainer_argv("train", "--data-dir", str(MNIST_DIR), "--no-download",
                                                  "--checkpoint-dir", str(ckpt), "--precision", precision),
                        1, 1, 850)
    epochs = [r for r in map(json.loads, (ckpt / "metrics.jsonl").read_text().splitlines()) if r["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3, 4, 5]
    report = ", ".join(f"epoch {e['epoch']}: {e['test_accuracy']:.4f} in {e['seconds']:.1f} s" for e in epochs)
    print(f"test accuracy with the defaults in {precision}: {report}")
    assert epochs[-1]["test_accuracy"] >= 0.98, report
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert "Rank 0: training completed." in procs[0].output
    assert [r for r in map(json.loads, (ckpt / "metrics.jsonl").read_text().splitlines())
            if r["event"] == "start"][0]["precision"] == precision
