"""`jaxgen render -o DIR` where DIR is a mount point (a bind mount, a container's volume): it cannot be
renamed or removed ("Device or resource busy"), so the render is written inside it."""

import shutil
import subprocess
import sys

import pytest

from tests.support.paths import EXAMPLES_DIR, REPO_ROOT

SEED = str(EXAMPLES_DIR / "seed.json")
pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) and root")


def in_a_bind_mount(tmp_path, *renders: list[str]) -> subprocess.CompletedProcess:
    """Each render's jaxgen command, in a mount namespace of its own where tmp_path/mnt is a bind mount."""
    source, mount = tmp_path / "source", tmp_path / "mnt"
    source.mkdir(exist_ok=True)
    mount.mkdir(exist_ok=True)
    commands = [" ".join(map(repr, [sys.executable, "-m", "generator", "render", *args, "-o", str(mount)]))
                for args in renders]
    script = f"mount --bind {source} {mount} && " + " && ".join(commands) + f" && ls -A {mount}"
    return subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_render_into_an_empty_mount_point_and_again_over_it(tmp_path):
    done = in_a_bind_mount(tmp_path, [SEED], [SEED, "--target", "jaxjob"])
    if "mount: " in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip("no permission to mount here")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    second = [".jaxgen-output", "jaxjob-jax-training.yaml", "networkpolicy-jax-training.yaml",
              "service-jax-training-coord.yaml"]
    assert done.stdout.split() == second  # the second render alone
    assert sorted(p.name for p in (tmp_path / "source").iterdir()) == second
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt", "source"]  # nothing staged beside it


def test_a_mount_point_holding_a_users_files_is_refused_as_any_directory(tmp_path):
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "notes.txt").write_text("mine")
    done = in_a_bind_mount(tmp_path, [SEED])
    assert done.returncode == 2 and "did not write" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert [p.name for p in (tmp_path / "source").iterdir()] == ["notes.txt"]


def test_a_tmpfs_mount_point_under_a_read_only_parent_holds_the_render(tmp_path):
    """A container's volume whose parent the user cannot write: nothing can be staged beside it."""
    parent, mount = tmp_path / "parent", tmp_path / "parent" / "mnt"
    mount.mkdir(parents=True)
    render = " ".join(map(repr, [sys.executable, "-m", "generator", "render", SEED, "-o", str(mount)]))
    script = (f"mount --bind {parent} {parent} && mount -o remount,ro,bind {parent} && "
              f"mount -t tmpfs tmpfs {mount} && {render} && {render} --target jaxjob && ls -A {mount}")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    if "mount: " in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip("no permission to mount here")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.split()[-4:] == [".jaxgen-output", "jaxjob-jax-training.yaml", "networkpolicy-jax-training.yaml",
              "service-jax-training-coord.yaml"]


def test_a_mount_point_keeps_what_the_render_did_not_write(tmp_path):
    """A build folder on a mount point that runs have used (an older jaxgen's marker): its results/
    stays, the previous render's files go."""
    (tmp_path / "source" / "results" / "jax-training").mkdir(parents=True)
    (tmp_path / "source" / "results" / "jax-training" / "summary.json").write_text("{}")
    (tmp_path / "source" / "deployment-old.yaml").write_text("{}")
    (tmp_path / "source" / ".jaxgen-output").write_text("written by jaxgen render; replaced as a whole\n")
    done = in_a_bind_mount(tmp_path, [SEED, "--target", "jaxjob"])
    if "mount: " in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip("no permission to mount here")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.split() == [".jaxgen-output", "jaxjob-jax-training.yaml", "networkpolicy-jax-training.yaml",
                                   "results", "service-jax-training-coord.yaml"]
    assert (tmp_path / "source" / "results" / "jax-training" / "summary.json").read_text() == "{}"


def test_a_kept_entry_that_cannot_move_loses_none_of_the_others(tmp_path):
    """A used build folder whose results/ is a mount point (it cannot be renamed): the render fails in
    one line, and the kept entries carried before it are put back (they were deleted with the staging)."""
    build, source = tmp_path / "build", tmp_path / "source"
    first = subprocess.run([sys.executable, "-m", "generator", "render", SEED, "-o", str(build)], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    (build / "a-notes.txt").write_text("mine")
    (build / "results").mkdir()
    source.mkdir()
    (source / "summary.json").write_text("{}")
    render = " ".join(map(repr, [sys.executable, "-m", "generator", "render", SEED, "-o", str(build)]))
    done = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount --bind {source} {build / 'results'} && {render}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    if "mount: " in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip("no permission to mount here")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == f"error: {build}: cannot write: Device or resource busy", done.stderr
    assert (build / "a-notes.txt").read_text() == "mine"
    assert (build / "job-jax-training.yaml").is_file() and not (build / "results" / "summary.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "source"]  # nothing left beside it
