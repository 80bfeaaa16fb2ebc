"""The kwok scale benchmark starts its own kwok cluster, times a small release of each target on fake
nodes, and its figures reach the report's tables."""

import json
import subprocess
import sys

import pytest

from benchmarks import kwok_scale, report
from tests.support.paths import REPO_ROOT


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_small_releases_reach_running_with_complete_endpoints(tmp_path):
    out = tmp_path / "scale.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.kwok_scale", "--hosts", "3", "--nodes", "4",
                           "--timeout", "120", "--output", str(out)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=380)
    assert done.returncode == 0, done.stderr[-4000:]
    scale = json.loads(done.stdout)
    assert scale == json.loads(out.read_text())
    assert scale["nodes"] == 4 and scale["api_qps"]
    assert [(r["target"], r["hosts"]) for r in scale["runs"]] == [(target, 3) for target in kwok_scale.TARGETS]
    for r in scale["runs"]:
        assert r["render_seconds"] > 0 and r["manifest_bytes"] > 1000
        assert 0 < r["applied_seconds"] <= r["created_seconds"] <= r["scheduled_seconds"] <= r["running_seconds"]
        assert r["endpoints_seconds"] >= r["applied_seconds"]
        # status: its 1-s metrics read plus start-up, which a loaded machine stretches; far below a hung read
        assert 0 < r["check_seconds"] < 30 and 0 < r["status_seconds"] < 5
    assert scale["indexed_job_3_running_seconds"] == scale["runs"][0]["running_seconds"]
    text = "\n".join(report.kwok_markdown(scale))
    assert all(f"| {target} | 3 |" in text for target in kwok_scale.TARGETS)


def test_bad_host_list_is_one_line_and_nothing_starts():
    done = subprocess.run([sys.executable, "-m", "benchmarks.kwok_scale", "--hosts", "16,x"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--hosts" in done.stderr and "Traceback" not in done.stderr
