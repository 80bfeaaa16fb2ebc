"""The lifecycle scripts' command lines, without a cluster: a missing or bad option value, an unknown
option or part, and a build folder that prepare.sh did not write are each one error line and exit 2
(bad usage; 1 is a failure), never a shell's own message."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.support.paths import EXAMPLES_DIR, SCRIPTS_DIR as SCRIPTS
from tests.support.procs import free_port
CASES = [
    ("run.sh", ["--timeout"], 2, "error: --timeout needs a value"),
    ("run.sh", ["--timeout", "99999999999999999999999"], 2, "error: --timeout must be a whole number of seconds"),
    ("run.sh", ["--timeout", "0x10"], 2, "error: --timeout must be a whole number of seconds"),
    ("run.sh", ["--kubeconfig"], 2, "error: --kubeconfig needs a value"),
    ("run.sh", ["--bogus"], 2, "error: unknown option --bogus"),
    ("run.sh", ["/no/such/build"], 2, "/no/such/build: no such build folder"),
    ("run.sh", ["."], 2, "./release/release.env not found: prepare the build folder first"),
    ("run.sh", ["--local", "."], 2, "./release/values.json not found: prepare the build folder"),
    ("clean.sh", ["/no/such/build"], 2, "/no/such/build/release/release.env not found"),
    ("clean.sh", ["--timeout", ""], 2, "error: --timeout needs a value"),
    ("clean.sh", ["--name"], 2, "error: --name needs a value"),
    # checked before the cluster is asked: a name is the label selector's value
    ("clean.sh", ["--name", "BAD NAME"], 2, "error: --name 'BAD NAME' is not a release name"),
    ("clean.sh", ["--name", "x,app=other"], 2, "error: --name 'x,app=other' is not a release name"),
    ("clean.sh", ["--name", "a" * 64], 2, "is not a release name"),
    ("prepare.sh", ["-o"], 2, "error: -o needs a value"),
    ("prepare.sh", ["--set-json"], 2, "error: --set-json needs a value"),
    ("prepare.sh", ["-n", "default", "--set", "a={x"], 2, "a list must end with '}'"),
    ("image.sh", ["--variant"], 2, "error: --variant needs a value"),
    ("image.sh", ["--variant", "rocm"], 2, "--variant must be one of: cpu cuda12"),
    ("image.sh", ["--push", "Registry/X:tag"], 2, "--push takes a repository without a tag"),
    ("image.sh", ["--debian", "buster"], 2, "--debian must be bookworm or trixie"),
    ("image.sh", ["--builder", "kaniko"], 2, "--builder must be buildah, podman or docker, not 'kaniko'"),
    ("image.sh", ["--bogus"], 2, "error: unknown argument: --bogus"),
    ("setup.sh", ["bogus"], 2, "error: unknown part 'bogus'"),
    ("setup.sh", ["dev bogus"], 2, "error: unknown part 'dev bogus'"),
    ("cluster/up.sh", ["--bogus"], 2, "error: unknown argument: --bogus"),
    ("cluster/up.sh", ["--state-dir"], 2, "error: --state-dir needs a value"),
    ("cluster/up.sh", ["--api-qps", "0"], 2, "error: --api-qps must be an integer from 1 to 99999"),
    ("cluster/up.sh", ["--network-policy"], 2, "error: --network-policy needs --real-node or --real-nodes N"),
    ("cluster/network-policy.sh", ["start"], 2, "error: usage: scripts/cluster/network-policy.sh start STATE_DIR"),
    ("cluster/network-policy.sh", ["bogus"], 2,
     "error: usage: scripts/cluster/network-policy.sh check | start STATE_DIR | stop STATE_DIR"),
    ("cluster/down.sh", ["--bogus"], 2, "error: unknown option: --bogus"),
    ("cluster/down.sh", [], 2, "error: STATE_DIR is required"),
    ("cluster/build.sh", ["--bogus"], 2, "error: unknown argument: --bogus"),
    ("slurm/up.sh", ["--bogus"], 2, "error: unknown argument '--bogus'"),
    ("slurm/up.sh", ["--owner-pid"], 2, "error: --owner-pid needs a value"),
    ("slurm/setup.sh", ["bogus"], 2, "error: unknown argument: bogus (usage: scripts/slurm/setup.sh)"),
    ("tools.sh", ["bogus"], 2, "error: unknown argument: bogus (usage: scripts/tools.sh [helm])"),
    ("tools.sh", ["helm", "bogus"], 2, "error: unknown argument: helm bogus (usage: scripts/tools.sh [helm])"),
    ("tools.sh", [""], 2, "error: unknown argument:  (usage: scripts/tools.sh [helm])"),
    ("cluster/node-setup.sh", ["bogus"], 2, "error: unknown argument: bogus (usage: scripts/cluster/node-setup.sh)"),
    ("cluster/host-volume.sh", ["state", "ns"], 2,
     "error: usage: scripts/cluster/host-volume.sh [--no-claim] STATE_DIR NAMESPACE NAME [SOURCE_DIR]"),
    ("cluster/pause-image.sh", ["image"], 2, "error: usage: scripts/cluster/pause-image.sh IMAGE ARCHIVE"),
    ("cluster/node-down.sh", [], 2, "error: usage: scripts/cluster/node-down.sh STATE_DIR"),
    ("cluster/node-fault.sh", ["state", "2"], 2, "error: usage: scripts/cluster/node-fault.sh STATE_DIR NODE"),
    ("cluster/node-fault.sh", ["/no/such/state", "2", "power-off"], 2,
     "error: /no/such/state is not the state directory of a running cluster"),
    ("cluster/certs.sh", [], 2, "error: usage: scripts/cluster/certs.sh DIR"),
    ("cluster/certs.sh", ["a", "b"], 2, "error: usage: scripts/cluster/certs.sh DIR"),
    ("cluster/controllers/training-operator-certs.sh", [], 2,
     "error: usage: scripts/cluster/controllers/training-operator-certs.sh DIR"),
]


@pytest.mark.parametrize("script,args,code,message", CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_bad_usage_is_one_line_and_its_exit_code(tmp_path, script, args, code, message):
    proc = subprocess.run(["bash", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode == code, proc.stderr
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert ": line " not in proc.stderr  # no message of bash's own ("script: line N: ...")


@pytest.mark.parametrize("variable,value,message", [
    ("JAXT_SLURM_CRED_EXPIRE", "4", "a whole number of seconds, at least 5 (SLURM's minimum)"),
    ("JAXT_SLURM_BF_INTERVAL", "0", "a whole number of seconds from 1 to 9999")])
def test_slurm_up_sh_refuses_a_bad_scheduler_setting_before_it_starts_anything(tmp_path, variable, value, message):
    """SLURM itself would only log a bad value in slurm.conf and run with its default."""
    proc = subprocess.run(["bash", str(SCRIPTS / "slurm" / "up.sh")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, variable: value, "JAXT_SLURM_DIR": str(tmp_path / "slurm")})
    assert proc.returncode == 2 and proc.stderr == f"[up.sh] error: {variable} must be {message}\n", proc.stderr
    assert not (tmp_path / "slurm").exists()


def test_image_sh_checks_its_options_before_it_looks_for_a_builder(tmp_path):
    """A bad --push was said only once a builder and runc were found: without them, exit 1 for those."""
    bin_dir = tmp_path / "bin"  # no buildah, podman, docker or runc
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    for command in ("bash", "dirname", "basename", "mkdir", "cat"):
        (bin_dir / command).symlink_to(shutil.which(command))
    proc = subprocess.run([str(bin_dir / "bash"), str(SCRIPTS / "image.sh"), "--push", "Registry/X:tag"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PATH": str(bin_dir)})
    assert proc.returncode == 2 and proc.stderr == (
        "[image.sh] error: --push takes a repository without a tag (registry/path, lowercase), not 'Registry/X:tag'\n")


def test_setup_sh_sets_up_nothing_when_a_part_is_unknown(tmp_path):
    """setup.sh dev bogus set dev up (minutes) before it said that bogus is no part."""
    called = tmp_path / "python3-called"
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "python3").write_text(f"#!/bin/sh\ntouch '{called}'\nexit 1\n")
    (fake / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "JAXT_VENV": str(tmp_path / "venv"),
           "JAXT_CACHE": str(tmp_path / "cache")}
    for parts in (["dev", "bogus"], ["demo", "all", "Dev"], ["all", "--bogus"]):
        proc = subprocess.run(["bash", str(SCRIPTS / "setup.sh"), *parts], capture_output=True, text=True, timeout=60,
                              env=env)
        assert proc.returncode == 2 and proc.stderr == (
            f"[setup.sh] error: unknown part '{parts[-1]}' (demo, python, dev, helm, install, tools, cluster, node, "
            "slurm, all)\n"), proc.stderr
    assert not called.exists() and not (tmp_path / "venv").exists()


def test_run_sh_refuses_a_slurm_build_before_it_looks_for_a_cluster(tmp_path):
    build = tmp_path / "build"
    prepared = subprocess.run(["bash", str(SCRIPTS / "prepare.sh"), str(EXAMPLES_DIR / "seed.json"),
                               "--target", "slurm", "--set", "data.dir=/shared/mnist",
                               "--set", "checkpoint.dir=/shared/runs", "-o", str(build)], capture_output=True, text=True, timeout=120)
    assert prepared.returncode == 0, prepared.stderr
    proc = subprocess.run(["bash", str(SCRIPTS / "run.sh"), str(build)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KUBECONFIG": "/nonexistent"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"[run.sh] error: {build}: target slurm has no Kubernetes job for run.sh to drive "
                           "(submit a SLURM script with sbatch; a build folder from an older version: run prepare.sh "
                           "again)\n")


def test_run_without_a_reachable_cluster_names_the_context_and_kubeconfig_tried(tmp_path):
    """Not kubectl's advice to turn validation off: there is no cluster to validate against."""
    build = tmp_path / "build"
    prepared = subprocess.run(["bash", str(SCRIPTS / "prepare.sh"), str(EXAMPLES_DIR / "seed.json"), "-o", str(build)],
                              capture_output=True, text=True, timeout=120)
    assert prepared.returncode == 0, prepared.stderr
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}], "users": [{"name": "u", "user": {}}]}))
    for args, env in (([], {"KUBECONFIG": str(config)}), (["--kubeconfig", str(config)], {})):
        proc = subprocess.run(["bash", str(SCRIPTS / "run.sh"), *args, str(build)], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "KUBECONFIG": "/nonexistent", **env})
        assert proc.returncode == 1, proc.stderr
        [line] = [line for line in proc.stderr.splitlines() if "error" in line]
        assert f"error: no reachable Kubernetes cluster: context gone of kubeconfig {config} (" in line, proc.stderr
        assert "validate" not in proc.stderr and "applying" not in proc.stderr


@pytest.mark.timeout(300)
def test_the_test_lanes_run_every_tier_and_fail_when_one_collects_nothing():
    """scripts/test.sh (make test): the slurm, kubernetes and rest lanes are three pytest sessions over
    the whole of tests/ between them; a lane that runs nothing is a failure (exit 5), not a pass."""
    proc = subprocess.run(["bash", str(SCRIPTS / "test.sh"), "-k", "test_kueue_is_the_version_the_tests_run"],
                          capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out
    for lane, code in (("slurm", 5), ("kubernetes", 5), ("rest", 0)):
        assert f"===== lane {lane} (pytest exit {code}) =====" in out, out
    assert "1 passed" in out and "slurm exit 5, kubernetes exit 5, rest exit 0" in out, out


@pytest.mark.parametrize("script,args", [("tools.sh", ["bogus"]), ("tools.sh", ["helm", "bogus"])], ids=" ".join)
def test_tools_sh_builds_nothing_for_an_unknown_tool(tmp_path, script, args):
    """tools.sh read only its first argument, as helm or not: anything else built every tool (minutes)."""
    cache = tmp_path / "cache"
    proc = subprocess.run(["bash", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "JAXT_CACHE": str(cache)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert [p.name for p in cache.rglob("*")] == ["bin"]  # the folder common.sh makes; nothing in it


def test_slurm_down_sh_stops_nothing_when_given_an_argument(tmp_path):
    """slurm/down.sh takes no argument: it ignored one and stopped the local SLURM, removing its state."""
    state = tmp_path / "slurm"
    state.mkdir()
    (state / "kept").write_text("")
    proc = subprocess.run(["bash", str(SCRIPTS / "slurm" / "down.sh"), str(state)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "JAXT_SLURM_DIR": str(state)})
    assert proc.returncode == 2 and proc.stderr == (
        f"[down.sh] error: unknown argument: {state} (usage: scripts/slurm/down.sh)\n"), proc.stderr
    assert (state / "kept").exists()


def test_certs_sh_help_is_on_standard_output_and_exit_0(tmp_path):
    for script in ("cluster/certs.sh", "cluster/controllers/training-operator-certs.sh"):
        proc = subprocess.run(["bash", str(SCRIPTS / script), "--help"], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith(f"Usage: scripts/{script} DIR") and not proc.stderr
        assert list(tmp_path.iterdir()) == []
