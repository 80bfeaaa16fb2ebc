"""Every registered model, selected by training.model: its settings (and no other model's) reach the
trainer's command line, and a short local run (strategy sharded with a model axis in bfloat16, pmap
in float32) trains, resumes from its checkpoint and exports a model that `python -m trainer evaluate`
and its card's NumPy snippet score alike."""

import json
import re
import subprocess
import sys

import pytest

from generator.engines.kubernetes.local.plan import local_values, plan_job
from generator.engines.kubernetes import render_documents
from generator.values import load_values
from tests.support.paths import MNIST_DIR
from tests.support.procs import kill, start, wait_all
from tests.trainer.test_accuracy import check_the_cards_snippet
from tests.trainer.test_local_run import CPU_LOCAL, MIRROR, jaxgen_run
from trainer import models
from trainer.config import TrainConfig, flag

MODELS = pytest.mark.parametrize("name", models.NAMES)


def _model_flags(name: str) -> set[str]:
    return {flag(f) for f in TrainConfig.__dataclass_fields__.values() if f.metadata["model"] == name}


@MODELS
def test_only_the_selected_models_settings_are_rendered(tmp_path, name):
    values = load_values([CPU_LOCAL], [MIRROR, f"training.model={name}"])
    [plan, _] = plan_job(values, render_documents(local_values(values)), tmp_path).plans
    args = plan.argv[3:]
    assert args[args.index("--model") + 1] == name
    rendered = {a for a in args if a.startswith("--")}
    assert _model_flags(name) and _model_flags(name) <= rendered
    for other in set(models.NAMES) - {name}:
        assert not _model_flags(other) & rendered
    for s in models.get(name).settings:  # each setting's value from its variable
        value = values["training"][name][s.name]
        expected = ",".join(map(str, value)) if s.is_list else str(value)
        assert args[args.index(f"--{name}-{s.name.replace('_', '-')}") + 1] == expected


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy, model_axis, precision", [("sharded", 2, "bfloat16"), ("pmap", 1, "float32")])
@MODELS
def test_every_model_trains_resumes_and_exports_locally(tmp_path, name, strategy, model_axis, precision):
    # 2 processes x 2 devices; 512 examples, batch 64: 8 steps an epoch
    base = ["--set", f"training.model={name}", "--set", "local_device_count=2", "--set", f"training.strategy={strategy}",
            "--set", f"training.model_parallelism={model_axis}", "--set", f"training.precision={precision}",
            "--set", "training.train_examples=512", "--set", "training.batch_size=64", "--set", "training.log_every=4",
            "--set", "training.lr_schedule=constant", "--set", "checkpoint.every_steps=4",
            "--set", "persistence.enabled=true", "--work-dir", str(tmp_path / "work")]
    for epochs in (1, 2):  # the second run resumes from the first's last checkpoint
        proc = start(jaxgen_run(tmp_path, *base, "--set", f"training.epochs={epochs}"), tmp_path / f"run-{epochs}.log")
        try:
            assert wait_all([proc], 280) == [0], proc.output[-4000:]
        finally:
            kill(proc)
    out = proc.output
    assert re.search(r"\[mnist-cpu-0\] Rank 0: resuming from the checkpoint of step 8\b", out), out[-4000:]
    assert "all 2 processes completed" in out
    results = tmp_path / "outputs" / "mnist-cpu" / "latest"  # the newest finished run (generator/runstore/runs.py)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["steps"] == 16 and summary["resumed_from"] == [8]
    assert summary["config"]["model"] == name and summary["config"]["strategy"] == strategy
    settings = {k for k in summary["config"] if any(k.startswith(f"{m}_") for m in models.NAMES)}
    assert settings == {f"{name}_{s.name}" for s in models.get(name).settings}  # the selected model's only
    config = json.loads((results / "model" / "config.json").read_text())
    assert config["model"] == name and config["format"] == models.get(name).export_format
    scored = subprocess.run([sys.executable, "-m", "trainer", "evaluate", "--model", str(results / "model"),
                             "--data-dir", str(MNIST_DIR), "--no-download"], capture_output=True, text=True,
                            timeout=200)
    assert scored.stdout.startswith(f"test accuracy={summary['test_accuracy']:.4f} ("), scored.stdout + scored.stderr
    check_the_cards_snippet(results, name, precision, summary["test_accuracy"])
