"""The lifecycle scripts' command lines, without a cluster: a missing or bad option value, an unknown
option and a build folder that is not there are each one error line and the documented exit code
(2 bad usage, 1 a failure), never a shell's own message."""

from __future__ import annotations

import os
import subprocess

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
    ("run.sh", ["/no/such/build"], 1, "/no/such/build: no such build folder"),
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
    ("image.sh", ["--variant", "rocm"], 1, "--variant must be one of: cpu cuda12"),
    ("image.sh", ["--push", "Registry/X:tag"], 1, "--push takes a repository without a tag"),
    ("image.sh", ["--debian", "buster"], 1, "--debian must be bookworm or trixie"),
]


@pytest.mark.parametrize("script,args,code,message", CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_bad_usage_is_one_line_and_its_exit_code(tmp_path, script, args, code, message):
    proc = subprocess.run(["bash", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode == code, proc.stderr
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert ": line " not in proc.stderr  # no message of bash's own ("script: line N: ...")


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
    """scripts/test.sh (make test): the engines' lane and the rest's lane are two pytest sessions over
    the whole of tests/ between them; a lane that runs nothing is a failure (exit 5), not a pass."""
    proc = subprocess.run(["bash", str(SCRIPTS / "test.sh"), "-k", "test_kueue_is_the_version_the_tests_run"],
                          capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out
    assert "===== lane engines (pytest exit 5) =====" in out and "===== lane rest (pytest exit 0) =====" in out, out
    assert "1 passed" in out and "engines exit 5, rest exit 0" in out, out
