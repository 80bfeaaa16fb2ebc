"""What `pip install .` gives a user: the wheel built from the tracked files, installed offline into
a fresh virtualenv (dependencies from the wheelhouse scripts/setup.sh fills), then used from a
directory outside the checkout, so that nothing can be imported from the source tree."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.support.checkout import tracked_copy
from tests.support.paths import CACHE, EXAMPLES_DIR, REPO_ROOT
from tests.support.procs import free_port, start, wait_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WHEELHOUSE = CACHE / "wheelhouse"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """(the wheel built from the tracked files, the output of building it)."""
    if not any(WHEELHOUSE.glob("jax-*.whl")):
        pytest.fail(f"{WHEELHOUSE} has no jax wheel: run scripts/setup.sh dev")
    root = tmp_path_factory.mktemp("wheel")
    source = tracked_copy(root / "source")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as on a user's machine
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--disable-pip-version-check",
         "--find-links", str(WHEELHOUSE), "--wheel-dir", str(root / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, env=env)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = (root / "dist").glob("jax_training-*.whl")
    return wheel, build.stdout + build.stderr


def install(root: Path, requirement: str) -> Path:
    """A fresh virtualenv in `root` with `requirement` installed offline; its bin directory."""
    venv.create(root / "venv", with_pip=True)
    bin_dir = root / "venv" / "bin"
    proc = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
         "--find-links", str(WHEELHOUSE), requirement],
        capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return bin_dir


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> tuple[Path, str]:
    """(the bin directory of a virtualenv with the wheel and its trainer extra, the output of building it)."""
    wheel, output = built
    return install(tmp_path_factory.mktemp("trainer"), f"{wheel}[trainer]"), output


@pytest.fixture(scope="module")
def bare(built, tmp_path_factory) -> Path:
    """The bin directory of a virtualenv with the wheel alone: jaxgen's needs, no jax, no matplotlib."""
    wheel, _ = built
    return install(tmp_path_factory.mktemp("bare"), str(wheel))


def run(bin_dir: Path, cwd: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}, **(env or {})}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", JAX_PLATFORMS="cpu")
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_the_wheel_builds_without_a_warning(installed):
    _, output = installed
    warnings = [line for line in output.splitlines() if "warning" in line.lower()]
    assert not warnings, "\n".join(warnings)


def test_jaxgen_from_the_wheel_renders_validates_and_prints_the_schema(installed, tmp_path):
    bin_dir, _ = installed
    where = run(bin_dir, tmp_path, "python", "-c", "import generator, trainer; print(generator.__file__, trainer.__file__)")
    assert where.returncode == 0 and str(REPO_ROOT) not in where.stdout and "site-packages" in where.stdout, where

    for example in ("seed.json", "slurm.json"):
        out = tmp_path / example
        proc = run(bin_dir, tmp_path, "jaxgen", "render", str(EXAMPLES_DIR / example), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        assert any(out.iterdir()), f"jaxgen render {example} wrote nothing"
    assert run(bin_dir, tmp_path, "jaxgen", "validate", str(EXAMPLES_DIR / "seed.json")).returncode == 0
    schema = run(bin_dir, tmp_path, "jaxgen", "schema")
    assert schema.returncode == 0 and '"$schema"' in schema.stdout
    version = run(bin_dir, tmp_path, "jaxgen", "--version")
    assert version.returncode == 0 and version.stdout.split()[-1] == installed_version(bin_dir, tmp_path)


def installed_version(bin_dir: Path, cwd: Path) -> str:
    proc = run(bin_dir, cwd, "python", "-c", "import importlib.metadata as m; print(m.version('jax-training'))")
    return proc.stdout.strip()


def test_the_trainer_from_the_wheel_queries_its_devices(installed, tmp_path):
    bin_dir, _ = installed
    proc = run(bin_dir, tmp_path, "python", "-m", "trainer", "query")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Rank 0: process 0/1: local devices 1" in proc.stdout and "global devices 1" in proc.stdout, proc.stdout


def test_the_bring_your_own_example_from_the_wheel_runs_as_two_processes(installed, tmp_path):
    bin_dir, _ = installed
    example = run(bin_dir, tmp_path, "python", "-c",
                  "import trainer, pathlib; print(pathlib.Path(trainer.__file__).parent / 'examples' / 'allreduce.py')")
    script = example.stdout.strip()
    assert example.returncode == 0 and Path(script).is_file(), example
    port = free_port()
    procs = []
    for rank in range(2):
        env = {"PYTHONPATH": "", "JAX_PLATFORMS": "cpu", "JAX_LOCAL_DEVICE_COUNT": "1",
               "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}
        procs.append(start([str(bin_dir / "python"), script], tmp_path / f"rank-{rank}.log", env))
    codes = wait_all(procs, 120)
    assert codes == [0, 0], "\n".join(p.output for p in procs)
    for rank, proc in enumerate(procs):
        assert f"process {rank}/2: 1 local of 2 devices, psum of process ids = 1 (expected 1)" in proc.output


# Every command the wheel installs, as a user without any extra would first try it: (argv, the extra it
# names in one line, or None when it needs none; the exit code). A cluster command without a cluster
# is its own one line (exit 3).
SEED, CPU_LOCAL = str(EXAMPLES_DIR / "seed.json"), str(EXAMPLES_DIR / "cpu-local.json")
RUN_ID = "20261125T170102.345Z-3f9a"
BARE_COMMANDS = {
    "jaxgen check": (["jaxgen", "check", SEED], None, 3),
    "jaxgen defaults": (["jaxgen", "defaults"], None, 0),
    "jaxgen list": (["jaxgen", "list", "--local", "--outputs", "outputs"], None, 0),
    "jaxgen logs": (["jaxgen", "logs", "job", "--local", "--outputs", "outputs"], None, 2),
    "jaxgen plot": (["jaxgen", "plot", "metrics.jsonl", "-o", "curves.png"], "plot", 2),
    "jaxgen render": (["jaxgen", "render", SEED], None, 0),
    "jaxgen results": (["jaxgen", "results", "outputs/job"], None, 0),
    "jaxgen results s3": (["jaxgen", "results", "s3://jaxt-outputs/job"], "s3", 2),
    "jaxgen run": (["jaxgen", "run", CPU_LOCAL], "trainer", 2),
    "jaxgen run own program": (["jaxgen", "run", CPU_LOCAL, "--outputs", "outputs", "--set-json",
                                'program.command=["python3", "-c", "pass"]'], None, 0),
    "jaxgen schema": (["jaxgen", "schema"], None, 0),
    "jaxgen status": (["jaxgen", "status", "job", "--local", "--outputs", "outputs"], None, 0),
    "jaxgen validate": (["jaxgen", "validate", SEED], None, 0),
    "jax-trainer train": (["jax-trainer", "train", "--epochs", "1"], "trainer", 2),
    "jax-trainer query": (["jax-trainer", "query"], "trainer", 2),
    "jax-trainer allreduce": (["jax-trainer", "allreduce"], "trainer", 2),
    "jax-trainer evaluate": (["jax-trainer", "evaluate", "--model", "model"], "trainer", 2),
    "jax-trainer predict": (["jax-trainer", "predict", "--model", "model", "digit.png"], "trainer", 2),
}


def installed_commands(bin_dir: Path, cwd: Path) -> set[str]:
    """The subcommands the installed jaxgen and jax-trainer list in their --help."""
    jaxgen = run(bin_dir, cwd, "jaxgen", "--help").stdout.split("\nCommands:\n", 1)[1]
    [trainer] = re.findall(r"\{([a-z,]+)\}", run(bin_dir, cwd, "jax-trainer", "--help").stdout)[:1]
    return {f"jaxgen {line.split()[0]}" for line in jaxgen.splitlines() if line.strip()} | \
        {f"jax-trainer {name}" for name in trainer.split(",")}


def test_every_installed_command_is_tried_without_its_extra(bare, tmp_path):
    assert installed_commands(bare, tmp_path) <= {" ".join(key.split()[:2]) for key in BARE_COMMANDS}


@pytest.mark.parametrize("case", BARE_COMMANDS)
def test_a_command_without_its_extra_works_or_names_the_extra_in_one_line(built, bare, tmp_path, case):
    argv, extra, code = BARE_COMMANDS[case]
    wheel, _ = built  # what the extra is installed from: jax-training is on no package index
    run_dir = tmp_path / "outputs" / "job" / RUN_ID  # a kept run, as jaxgen run leaves it
    run_dir.mkdir(parents=True)
    os.symlink(RUN_ID, tmp_path / "outputs" / "job" / "latest")
    for folder in (tmp_path, run_dir):
        (folder / "metrics.jsonl").write_text('{"event": "start", "step": 0, "total_steps": 2, "time": 1}\n'
                                              '{"event": "step", "step": 1, "loss": 2.0}\n')
    (run_dir / "summary.json").write_text(json.dumps(
        {"test_accuracy": 0.97, "train_accuracy": 0.9, "epochs": 1, "steps": 2, "wall_seconds": 2.0,
         "examples_per_second": 100.0}))
    proc = run(bare, tmp_path, *argv, env={"KUBECONFIG": str(tmp_path / "no-kubeconfig")})
    output = proc.stdout + proc.stderr
    assert proc.returncode == code and "Traceback" not in output, output[-3000:]
    if code:
        lines = proc.stderr.splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), proc.stderr
        # one line, but for check without a cluster: the offline checks it still ran say theirs after it
        assert len(lines) == 1 or (case == "jaxgen check" and "no kubeconfig" in lines[0]), proc.stderr
    if extra:
        assert "needs" in proc.stderr and f"{bare / 'pip'} install '{wheel}[{extra}]'" in proc.stderr, proc.stderr
    else:
        assert "pip install" not in proc.stderr or "[plot]" in proc.stderr, proc.stderr  # results: the curves' note
    if case == "jaxgen results":
        assert "result: test accuracy 0.9700" in proc.stdout and f"install '{wheel}[plot]'" in proc.stderr


def test_the_commands_that_need_no_extra_work_without_them(bare, tmp_path):
    assert run(bare, tmp_path, "jax-trainer", "train", "--help").returncode == 0
    proc = run(bare, tmp_path, "jaxgen", "render", str(EXAMPLES_DIR / "seed.json"))
    assert proc.returncode == 0 and "kind: Job" in proc.stdout, proc.stderr
