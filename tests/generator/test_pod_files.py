"""The files a job ships run as they will in its pods, here on this machine: pod-start.py unpacks the
archives and installs, pinned by hash, only what the Python lacks (a wrong hash fails in one line);
sitecustomize.py lets an unmodified program call jax.distributed.initialize() with no arguments
under our variables and under a JAXJob's."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from generator import shipping
from tests.support.paths import SHARED_DIR

POD_START = shipping.POD_FILES / "pod-start.py"
SEED = SHARED_DIR / "seed-programs"


def _wheelhouse() -> Path:
    cache = os.environ.get("JAXT_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jax-training"
    return Path(cache) / "wheelhouse"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with pip and nothing else, as a stock image has."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def _pod_start(tmp_path: Path, python: str, lock: str) -> tuple[subprocess.CompletedProcess, Path]:
    shipped, run = tmp_path / "shipped", tmp_path / "run"
    shipped.mkdir()
    (shipped / "trainer.tar.gz").write_bytes(shipping.trainer_archive())
    (shipped / "program.tar.gz").write_bytes(shipping.program_archive(str(SEED)))
    (shipped / "stock-requirements.txt").write_text(lock)
    args = [python, str(POD_START), str(shipped), str(run), "--no-index", "--find-links", str(_wheelhouse())]
    env = {**os.environ, "PYTHONNOUSERSITE": "1", "PYTHONPATH": ""}
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env), run


def _pinned(name: str, digest: str | None = None) -> str:
    wheel = next(_wheelhouse().glob(f"{name}-*.whl"))
    digest = digest or hashlib.sha256(wheel.read_bytes()).hexdigest()
    return f"{name}=={wheel.name.split('-')[1]} --hash=sha256:{digest}"


@pytest.mark.slow
def test_pod_start_unpacks_and_installs_only_what_the_python_lacks(tmp_path, bare_python):
    # pip is the bare Python's own: the lock's line for it is never read
    done, run = _pod_start(tmp_path, bare_python, f"# a lock\n{_pinned('tqdm')}\npip==0.1 --hash=sha256:{'0' * 64}\n")
    assert done.returncode == 0, done.stderr
    assert "installing what the image lacks: tqdm\n" in done.stdout
    assert (run / "packages" / "tqdm").is_dir() and (run / "trainer" / "train.py").is_file()
    assert (run / "program" / "allreduce.py").read_bytes() == (SEED / "allreduce.py").read_bytes()


@pytest.mark.slow
def test_a_package_whose_hash_differs_is_refused_in_one_line(tmp_path, bare_python):
    done, run = _pod_start(tmp_path, bare_python, _pinned("tqdm", "0" * 64) + "\n")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("pod-start: pip could not install tqdm with image.pip_args")
    assert not (run / "packages" / "tqdm").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("variables", ["ours", "jaxjob"])
def test_an_unmodified_program_finds_its_peers(tmp_path, variables):
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(shipping.POD_FILES), "JAX_PLATFORMS": "cpu", "JAX_LOCAL_DEVICE_COUNT": "1"}
        if variables == "ours":
            env.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(rank))
        else:
            env.update(COORDINATOR_ADDRESS="127.0.0.1", COORDINATOR_PORT=str(port), NUM_PROCESSES="2",
                       PROCESS_ID=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(SEED / "allreduce.py")], cwd=SEED, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, output in enumerate(outputs):
        assert f"Process {rank} has y=[2.]" in output, output


def test_without_the_hook_the_same_program_cannot_start(tmp_path):
    """The planted violation: no sitecustomize, and JAX alone finds no peers."""
    env = {**os.environ, "PYTHONPATH": "", "JAX_PLATFORMS": "cpu", "JAX_COORDINATOR_ADDRESS": "127.0.0.1:1",
           "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}
    done = subprocess.run([sys.executable, str(SEED / "allreduce.py")], cwd=SEED, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "Number of processes must be defined" in done.stderr, done.stderr[-2000:]


def test_jaxgen_run_of_a_stock_job_runs_the_checkouts_trainer(tmp_path):
    """The local engine runs the render's container as a process: a stock job's PYTHONPATH there is the
    checkout's (nothing unpacks the pod's run folder on this machine)."""
    from generator.engines.kubernetes.local.plan import REPO_ROOT, local_values, plan_job
    from generator.engines.kubernetes.render import render_documents
    from generator.values import load_values
    from tests.support.paths import EXAMPLES_DIR

    values = local_values(load_values([str(EXAMPLES_DIR / "cpu-local.json")], ["image.source=stock"]))
    job = plan_job(values, render_documents(values), tmp_path)
    assert job.plans[0].env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
