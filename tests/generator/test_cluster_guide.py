"""docs/your-cluster.md stays true: the versions it and the target table (each row's Needs) name
are the ones scripts/cluster/versions.sh reads from the test control plane's go.mod files, and
every option it gives a project script is one that script's --help documents."""

from __future__ import annotations

import re
import subprocess

import pytest

from generator.targets import TARGETS
from tests.support.paths import REPO_ROOT, SCRIPTS_DIR

GUIDE = (REPO_ROOT / "docs" / "your-cluster.md").read_text()


def test_every_version_the_guide_and_the_target_table_name_is_pinned_by_versions_sh():
    rows = {t.needs.version for t in TARGETS.values() if t.needs.version}
    commands = [command for t in TARGETS.values() for command in t.needs.install]
    names = sorted(set(re.findall(r"\b([A-Z0-9_]+_VERSION)\b", GUIDE + "\n".join(commands))) | rows)
    assert rows and "KUEUE_VERSION" in names
    script = "source scripts/cluster/versions.sh; " + "; ".join(f'echo "{n}=${n}"' for n in names)
    out = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True)
    versions = dict(line.split("=", 1) for line in out.stdout.splitlines())
    for name in names:
        assert re.fullmatch(r"v\d+\.\d+\.\d+", versions[name]), f"{name}={versions[name]!r}"


def test_every_script_option_in_the_guide_is_documented_by_the_script():
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", GUIDE, re.S)).replace("\\\n", " ")
    calls = re.findall(r"scripts/([\w-]+\.sh)([^\n#]*)", blocks)
    assert {script for script, _ in calls} >= {"image.sh", "prepare.sh", "run.sh", "clean.sh"}
    for script, args in calls:
        usage = subprocess.run(["bash", str(SCRIPTS_DIR / script), "--help"], capture_output=True, text=True,
                               timeout=30)
        assert usage.returncode == 0, usage.stderr
        for option in re.findall(r"(?<!\S)(--[\w-]+)", args):
            assert option in usage.stdout, f"scripts/{script} {option}: not in its --help"


def test_the_guides_example_keeps_its_outputs_where_step_5_reads_them():
    """The guide's commands agree with its example: the render step 3 prepares keeps the outputs on a
    claim every pod can mount (ReadWriteMany where the example puts its pods on separate nodes), so
    step 5's `jaxgen results` and `jax-trainer evaluate` name the folder run.sh copies them into,
    <build>/results/<the example's name>; the example alone keeps them on an emptyDir, gone with the pods."""
    import json
    import sys

    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", GUIDE, re.S)).replace("\\\n", " ")
    example, build, rest = re.search(r"scripts/prepare\.sh (\S+) -o (\S+)([^\n]*)", blocks).groups()
    sets = re.findall(r"--set (\S+)", rest)
    assert f"scripts/run.sh {build}\n" in blocks

    def claims(*extra: str) -> list[dict]:
        render = subprocess.run([sys.executable, "-m", "generator", "render", str(REPO_ROOT / example), "-n", "default",
                                 "--format", "json", *extra], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert render.returncode == 0, render.stderr
        return [d for d in json.loads(render.stdout)["items"] if d["kind"] == "PersistentVolumeClaim"]

    assert claims() == []  # the example as it is: an emptyDir
    [claim] = claims(*(a for item in sets for a in ("--set", item)))
    values = json.loads((REPO_ROOT / example).read_text())
    if values.get("jobset", {}).get("exclusive_topology") or values.get("hosts_count", 1) > 1:
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"], claim["spec"]
    results = f"{build}/results/{values['name']}"
    assert re.findall(r"jaxgen results (\S+)", blocks) == [results]
    assert re.findall(r"jax-trainer evaluate --model (\S+)", blocks) == [f"{results}/latest/model"]


def test_the_real_node_test_runs_the_guides_stock_path_from_its_blocks():
    """tests/e2e_k8s/guide.py reads the commands the real-node test runs from the guide's blocks: the stock
    render of the folder step 4 runs, then steps 4 to 6; a guide whose render no longer matches is refused."""
    from tests.e2e_k8s import guide

    render, *rest = guide.stock_commands()
    assert render.startswith("scripts/prepare.sh ") and "image.source=stock" in render, render
    assert [c.split()[0] for c in rest] == ["scripts/run.sh", "jaxgen", "jax-trainer", "scripts/clean.sh",
                                            "scripts/clean.sh"], rest
    planted = GUIDE.replace("scripts/run.sh rendered\n", "scripts/run.sh elsewhere\n")
    with pytest.raises(AssertionError, match="step 3: one stock render of the folder step 4 runs"):
        guide.stock_commands(planted)
    unnamed = GUIDE.replace(" -o rendered", "", 1)  # a stock render without -o names no folder: refused alike
    assert unnamed != GUIDE
    with pytest.raises(AssertionError, match="step 3: one stock render of the folder step 4 runs"):
        guide.stock_commands(unnamed)
