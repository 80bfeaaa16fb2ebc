"""Bring your own program: trainer/examples/allreduce.py run as 2 real processes under each engine's
environment, and the one-line failures of trainer.distributed.initialize.

Every multi-process run is under a hard timeout and kills its process groups on failure.
"""

import shutil
import socket
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from generator.engines.kubernetes.local.plan import engine_env
from tests.support.procs import free_port, start, wait_all
from generator.targets import KUBERNETES, target as target_of
from trainer import exit_codes
from trainer.cluster import SLURM_PORTS
from trainer.distributed import initialize
from trainer.errors import ConfigError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EXAMPLE = REPO_ROOT / "trainer" / "examples" / "allreduce.py"
LOCAL_DEVICES = {"JAX_PLATFORMS": "cpu", "JAX_LOCAL_DEVICE_COUNT": "2"}


def free_slurm_job_id() -> int:
    """A job id whose SLURM coordinator port (picked from SLURM_PORTS by job id) is free here."""
    for port in SLURM_PORTS:
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
        return port - SLURM_PORTS.start
    pytest.skip("no free port in SLURM's coordinator range")


def jax_env(rank, port):  # our Indexed Job / JobSet, XPK
    return {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}


def trainjob_env(rank, port):  # Kubeflow Trainer v2's JAX plugin: host name and port, and the Job's index
    return {"JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_COORDINATOR_PORT": str(port),
            "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank), "JOB_COMPLETION_INDEX": str(rank)}


def jaxjob_env(rank, port):  # Kubeflow training-operator JAXJob v1
    return {"COORDINATOR_ADDRESS": "localhost", "COORDINATOR_PORT": str(port), "NUM_PROCESSES": "2",
            "PROCESS_ID": str(rank)}


def slurm_env(rank, job_id):  # an srun step; the coordinator is the step's first node
    return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": f"{socket.gethostname()},other[1-3]",
            "SLURM_JOB_ID": str(job_id)}


def run_example(tmp_path, name, env_for_rank, argv_for_rank=lambda rank: [sys.executable, str(EXAMPLE)]):
    procs = [start(argv_for_rank(rank), tmp_path / f"{name}-{rank}.log", {**LOCAL_DEVICES, **env_for_rank(rank)})
             for rank in range(2)]
    codes = wait_all(procs, 120)
    assert codes == [0, 0], "\n".join(f"--- {p.log.name} ({c})\n{p.output[-3000:]}" for p, c in zip(procs, codes))
    for rank, proc in enumerate(procs):
        assert f"process {rank}/2: 2 local of 4 devices, psum of process ids = 2 (expected 2)" in proc.output
    return procs


@pytest.mark.parametrize("style", ["jax", "trainjob", "jaxjob", "slurm"])
def test_example_all_reduces_across_two_processes_under_each_engines_environment(tmp_path, style):
    if style == "slurm":
        job_id = free_slurm_job_id()
        run_example(tmp_path, style, lambda rank: slurm_env(rank, job_id))
    else:
        port = free_port()
        run_example(tmp_path, style, lambda rank: globals()[f"{style}_env"](rank, port))


def test_example_under_an_indexed_job_finds_pod_0_by_its_headless_service_name(tmp_path):
    """Only what Kubernetes gives every Indexed Job pod, plus the process count: JOB_COMPLETION_INDEX
    and the pod's host name under its subdomain. Each process runs in its own user, mount and UTS
    namespaces, with the pod's host name and an /etc/hosts like the kubelet writes."""
    unshare = shutil.which("unshare")
    probe = unshare and subprocess.run([unshare, "--user", "--map-root-user", "--mount", "--uts", "true"],
                                       capture_output=True)
    if not probe or probe.returncode:
        pytest.skip("unprivileged user/mount/UTS namespaces are not available here")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(
        f"127.0.0.1 byo-{i}.byo.default.svc.cluster.local byo-{i}\n" for i in range(2)))
    port = free_port()

    def argv(rank):
        script = (f"mount --bind {hosts} /etc/hosts && hostname byo-{rank} && "
                  f'exec "{sys.executable}" "{EXAMPLE}"')
        return [unshare, "--user", "--map-root-user", "--mount", "--uts", "sh", "-c", script]

    env = lambda rank: {"JOB_COMPLETION_INDEX": str(rank), "JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_PORT": str(port)}
    run_example(tmp_path, "indexed-job", env, argv)  # no address given: pod 0 is found by its name


def test_device_count_mismatch_ends_every_process_with_one_line(tmp_path):
    port = free_port()
    procs = [start([sys.executable, str(EXAMPLE)], tmp_path / f"mismatch-{rank}.log",
                   {**jax_env(rank, port), "JAX_PLATFORMS": "cpu", "JAX_LOCAL_DEVICE_COUNT": str(2 - rank)})
             for rank in range(2)]
    assert wait_all(procs, 120) == [exit_codes.DEVICE_COUNT] * 2
    for rank, proc in enumerate(procs):
        local = 2 - rank
        last = proc.output.strip().splitlines()[-1]
        expected = f"Rank {rank}: error: 3 global devices, expected 2 processes x {local} local = {2 * local}"
        # Under load process 0 can see the mismatch and leave while process 1 still finishes its
        # backend with the coordinator; process 1 then fails on the lost coordinator, in one line.
        lost = rank and last.startswith(f"Rank {rank}: error: --platform cpu: no usable CPU backend")
        assert last == expected or lost, proc.output
        assert "Traceback" not in proc.output


def test_bad_setting_is_one_line_and_the_config_exit_code(tmp_path):
    program = "from trainer.distributed import initialize; initialize(); print('initialised')"
    proc = start([sys.executable, "-c", program], tmp_path / "bad.log", {"JAX_NUM_PROCESSES": "2"})
    assert wait_all([proc], 60) == [exit_codes.CONFIG]
    assert proc.output == (
        "Rank ?: error: JAX_NUM_PROCESSES=2 but the process id is unknown: pass --process-id or set JAX_PROCESS_ID\n")


def test_errors_are_raised_when_the_program_asks(monkeypatch):
    monkeypatch.setenv("JAX_LOCAL_DEVICE_COUNT", "0")
    with pytest.raises(ConfigError, match="JAX_LOCAL_DEVICE_COUNT=0 must be >= 1"):
        initialize(num_processes=1, process_id=0, exit_on_error=False)


@pytest.mark.parametrize("target", KUBERNETES)
def test_the_call_jaxgen_tells_an_own_program_to_make_brings_up_two_processes(tmp_path, target):
    """The warning of `jaxgen render` with program.command names a call; that call, in a plain JAX
    program that does not import this project, must bring up the job from the environment the row says
    its pods get (as `jaxgen run` sets it)."""
    program = tmp_path / "mine.py"
    program.write_text("import os\nimport jax\n"
                       f"{target_of(target).own_program_init}\n"
                       "print(f'process {jax.process_index()} of {jax.process_count()}, {jax.device_count()} devices')\n")
    port = free_port()
    procs = [start([sys.executable, str(program)], tmp_path / f"{target}-{rank}.log",
                   {"JAX_PLATFORMS": "cpu", "PYTHONPATH": "", **engine_env(target_of(target), rank, 2, port)})
             for rank in range(2)]
    codes = wait_all(procs, 120)
    assert codes == [0, 0], "\n".join(p.output[-2000:] for p in procs)
    for rank, proc in enumerate(procs):
        assert f"process {rank} of 2, 2 devices" in proc.output, proc.output


def test_the_guide_shows_each_targets_call():
    readme = (REPO_ROOT / "docs" / "own-program.md").read_text()
    for target in KUBERNETES:
        assert target_of(target).own_program_init in readme, target
