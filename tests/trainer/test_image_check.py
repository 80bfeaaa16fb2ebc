"""At start the trainer checks what it got: jax and jaxlib within the tested range (trainer/versions.py),
the platform its job was rendered for (--platform, from `accelerator`). A mismatch is one line in the
log and in the pod's termination message, with a documented exit code, and `jaxgen status` shows it."""

from __future__ import annotations

import sys

import pytest

from generator.engines.kubernetes import jobs
from generator.job_status import FAILED
from tests.support.paths import REPO_ROOT
from tests.support.procs import small_train_args, start, wait_all
from trainer import exit_codes, versions
from trainer.errors import ConfigError
from trainer.termination import error_message

# The trainer's command line with the termination message written to argv[1], as a pod's
# /dev/termination-log (which exists only in a pod): everything else as `python -m trainer`.
WITH_TERMINATION_LOG = ("import functools, sys; from trainer import errors, termination; "
                        "errors.terminate_with = functools.partial(termination.terminate_with, path=sys.argv.pop(1)); "
                        "from trainer.cli import main; sys.exit(main())")


def run_in_pod(tmp_path, argv: list[str], env: dict | None = None) -> tuple[int, list[str], str]:
    """(exit code, output lines, termination message) of the trainer run with `argv`."""
    message = tmp_path / "termination-log"
    message.write_text("")
    proc = start([sys.executable, "-c", WITH_TERMINATION_LOG, str(message), *argv], tmp_path / "out.log", env)
    [code] = wait_all([proc], 120)
    return code, proc.output.splitlines(), message.read_text()


def stub_distribution(folder, name: str, version: str) -> None:
    """An installed distribution's metadata, as pip leaves it, first on the path: what the check reads."""
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_a_jax_outside_the_tested_range_is_refused_in_one_line_before_jax_is_imported(tmp_path):
    stub_distribution(tmp_path / "site", "jax", "0.9.0")
    code, lines, message = run_in_pod(tmp_path, small_train_args(tmp_path / "c"),
                                      {"PYTHONPATH": f"{tmp_path / 'site'}:{REPO_ROOT}"})
    expected = (f"this Python has jax 0.9.0; the trainer is tested with jax and jaxlib {versions.supported()} "
                "(trainer/versions.py): run it on an image or in a venv with JAX in that range")
    assert (code, lines, message) == (exit_codes.CONFIG, [f"error: {expected}"],
                                      error_message(exit_codes.CONFIG, expected))
    assert not (tmp_path / "c").exists()  # refused before anything was claimed


@pytest.mark.parametrize("found, refused", [
    ({"jax": "0.10.1", "jaxlib": "0.10.2"}, "jax 0.10.1"),
    ({"jax": "0.13.0", "jaxlib": "0.13.0"}, "jax 0.13.0 and jaxlib 0.13.0"),
    ({"jax": "0.13.0rc1", "jaxlib": "0.12.0"}, "jax 0.13.0rc1"),
    ({"jax": "0.12.0.1", "jaxlib": None}, "no jaxlib"),
])
def test_each_package_outside_the_range_is_named(found, refused):
    with pytest.raises(ConfigError, match=f"^this Python has {refused};"):
        versions.check(found)


# 0.10.2.dev20260630+3757395a28: the JAX of NVIDIA's nvcr.io/nvidia/jax:26.07-py3, the GPU stock default
@pytest.mark.parametrize("version", [versions.LOWEST, "0.10.3", "0.12.0.1", "0.12.99", "0.10.2.dev20260630+3757395a28"])
def test_a_jax_in_the_range_passes(version):
    versions.check({"jax": version, "jaxlib": version})


def test_this_pythons_jax_passes():
    versions.check()


def test_a_platform_the_image_cannot_run_is_one_line_and_the_termination_message(tmp_path):
    """accelerator gpu renders --platform gpu: on an image or node without a usable GPU, one line."""
    code, lines, message = run_in_pod(tmp_path, ["query", "--platform", "gpu"], {"CUDA_VISIBLE_DEVICES": ""})
    errors = [line for line in lines if "error:" in line]
    assert code == exit_codes.DEVICE_COUNT and len(errors) == 1, lines
    assert errors[0].startswith("Rank 0: error: --platform gpu: no usable GPU backend (")
    assert message == error_message(exit_codes.DEVICE_COUNT, errors[0].removeprefix("Rank 0: error: "))
    assert "Traceback" not in "\n".join(lines)


def failed_job(pod_message: str) -> jobs._Job:
    """A failed Indexed Job whose pod's trainer container ended with `pod_message` as its termination message."""
    workload = jobs.KINDS["Job"].workload
    job = {"kind": "Job", "metadata": {"name": "mnist", "uid": "u1"},
           "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                                      "message": "Container trainer for pod default/mnist-0-x failed with exit "
                                                 "code 2 matching FailJob rule at index 0"}]}}
    pod = {"metadata": {"name": "mnist-0-x", "labels": {"batch.kubernetes.io/job-name": "mnist"},
                        "ownerReferences": [{"uid": "u1"}], "creationTimestamp": "2026-01-01T00:00:00Z"},
           "status": {"phase": "Failed", "containerStatuses": [
               {"name": workload.container, "state": {"terminated": {"exitCode": 2, "message": pod_message}}}]}}
    return jobs._Job(job, [pod], [])


def test_jaxgen_status_of_a_failed_job_shows_the_trainers_line():
    line = error_message(exit_codes.CONFIG, "this Python has jax 0.9.0; the trainer is tested with ...")
    assert failed_job(line).phase() == (FAILED, f"pod mnist-0-x: {line}")
    # A pod that left no error line (killed, or a result): the Job's own reason, as before.
    assert failed_job("").phase() == (FAILED, "Container trainer for pod default/mnist-0-x failed with exit code 2 "
                                              "matching FailJob rule at index 0")
