"""scripts/prepare.sh reads the variables once: a pipe, /dev/stdin or `-` works as a file does, and a
bad file leaves nothing behind (one line, exit 2). Runs without a cluster."""

from __future__ import annotations

import json
import re
import subprocess

from tests.support.paths import EXAMPLES_DIR, REPO_ROOT

PREPARE = REPO_ROOT / "scripts" / "prepare.sh"


def prepare(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    # -n: the namespace, whatever the kube context's
    return subprocess.run(["bash", str(PREPARE), "-n", "default", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_variables_from_stdin_or_a_pipe(tmp_path):
    seed = (EXAMPLES_DIR / "seed.json").read_text()
    for name, args in (("dash", ["-"]), ("dev-stdin", ["/dev/stdin"])):
        out = tmp_path / name
        proc = prepare(*args, "-o", str(out), stdin=seed)
        assert proc.returncode == 0, proc.stderr
        values = json.loads((out / "release" / "values.json").read_text())
        assert values["hosts_count"] == json.loads(seed)["hosts_count"]
        assert (out / "release" / "release.env").exists()
    out = tmp_path / "substitution"
    proc = subprocess.run(["bash", "-c", f'"{PREPARE}" -n default <(cat "{EXAMPLES_DIR / "seed.json"}") -o "{out}"'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "release" / "values.json").exists()


def test_a_bad_file_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "build"
    proc = prepare("-", "-o", str(out), stdin='{"hosts_count": 0}')
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "$.hosts_count: 0 is less than the minimum of 1" in proc.stderr
    assert not out.exists()


def test_the_default_build_folder_is_not_setuptools_build(tmp_path):
    """With no -o, prepare.sh writes DEFAULT_BUILD_DIR (scripts/lib/common.sh), never build/: a
    folder setuptools leaves there (pip install ., python -m build) stays as it was."""
    common = (REPO_ROOT / "scripts" / "lib" / "common.sh").read_text()
    default = re.search(r"^DEFAULT_BUILD_DIR=(\S+)$", common, re.M).group(1)
    assert default != "build"
    (tmp_path / "build" / "lib").mkdir(parents=True)
    proc = subprocess.run(["bash", str(PREPARE), "-n", "default", str(EXAMPLES_DIR / "seed.json")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / default / "release" / "release.env").exists()
    assert [p.name for p in (tmp_path / "build").iterdir()] == ["lib"]


def test_a_used_build_folder_keeps_its_results(tmp_path):
    """prepare.sh into a build folder that runs have used replaces only the render: BUILD/results (every
    earlier run's results) and anything else the render did not write stay as they were, an older
    jaxgen's build folder (its marker lists nothing) included, while the previous render's objects go."""
    seed = str(EXAMPLES_DIR / "seed.json")
    build = tmp_path / "build"
    assert prepare(seed, "-o", str(build)).returncode == 0
    summary = build / "results" / "jax-training" / "20260101-000000" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text('{"steps": 1}')
    (build / "results" / "jax-training" / "latest").symlink_to("20260101-000000")
    (build / "notes.txt").write_text("mine")
    first = sorted(p.name for p in build.glob("*.yaml"))
    for marker in (None, "written by jaxgen render; replaced as a whole on the next render\n"):
        if marker is not None:  # an older jaxgen's build folder
            (build / ".jaxgen-output").write_text(marker)
        proc = prepare(seed, "--target", "jaxjob", "-o", str(build))
        assert proc.returncode == 0, proc.stderr
        assert summary.read_text() == '{"steps": 1}'
        assert (build / "results" / "jax-training" / "latest" / "summary.json").exists()
        assert (build / "notes.txt").read_text() == "mine"
        assert sorted(p.name for p in build.glob("*.yaml")) == ["jaxjob-jax-training.yaml",
                                                                  "networkpolicy-jax-training.yaml",
                                                                  "service-jax-training-coord.yaml"] != first
        assert json.loads((build / "release" / "values.json").read_text())["target"] == "jaxjob"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"]  # nothing staged beside it is left


def test_a_users_file_where_the_render_writes_is_refused(tmp_path):
    seed = str(EXAMPLES_DIR / "seed.json")
    build = tmp_path / "build"
    assert prepare(seed, "-o", str(build)).returncode == 0
    (build / "jaxjob-jax-training.yaml").write_text("mine")  # not the first render's: the user's
    proc = prepare(seed, "--target", "jaxjob", "-o", str(build))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("jaxjob-jax-training.yaml: jaxgen did not write it and the render would "
                                        "replace it; move it away first"), proc.stderr
    assert (build / "jaxjob-jax-training.yaml").read_text() == "mine"
