"""One real single-node SLURM (scripts/slurm/up.sh) for the whole e2e_slurm tier.

It runs on its own state directory and free ports, so it never touches a SLURM started by hand
(scripts/slurm/up.sh without arguments). It is stopped at the end of the session by the fixture,
and, if the test process is killed, by up.sh's reaper (--owner-pid) within seconds.
"""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from .slurm import SCRIPTS, Slurm

PARTITION = "debug"
# up.sh installs the Debian packages on first use (about 10 s with a warm apt cache).
UP_TIMEOUT = int(os.environ.get("JAXT_E2E_SLURM_UP_TIMEOUT", "600"))


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="session")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("the local SLURM runs its daemons as root")
    state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-slurm."))
    ctld_port, slurmd_port = _free_ports(2)
    env = {**os.environ, "JAXT_SLURM_DIR": str(state), "JAXT_SLURMCTLD_PORT": str(ctld_port),
           "JAXT_SLURMD_PORT": str(slurmd_port), "JAXT_SLURM_PARTITION": PARTITION,
           # Job ids (hence coordinator ports) apart from any other SLURM on this machine.
           "JAXT_SLURM_FIRST_JOB_ID": str(random.randrange(1000, 4000) * 100),
           # A requeued job runs again after cred_expire + 1 s and the next backfill pass: within 18 s,
           # not the defaults' 121-151 s of idling (a step's credential is still checked well within
           # 15 s of its issue on a loaded host)
           "JAXT_SLURM_CRED_EXPIRE": "15", "JAXT_SLURM_BF_INTERVAL": "2"}
    down = [str(SCRIPTS / "down.sh")]
    try:
        proc = subprocess.run([str(SCRIPTS / "up.sh"), "--owner-pid", str(os.getpid())], env=env,
                              capture_output=True, text=True, timeout=UP_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        subprocess.run(down, env=env, timeout=120)
        pytest.fail(f"scripts/slurm/up.sh did not finish in {UP_TIMEOUT}s\n{exc.stderr}")
    if proc.returncode != 0:
        subprocess.run(down, env=env, timeout=120)
        pytest.fail(f"scripts/slurm/up.sh failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    match = re.search(r"^export SLURM_CONF=(\S+)$", proc.stdout, re.M)
    assert match, f"up.sh printed no SLURM_CONF: {proc.stdout!r}"
    env["SLURM_CONF"] = match.group(1)
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    daemons = {f.stem: int(f.read_text()) for f in state.glob("*.pid")}
    try:
        yield Slurm(state_dir=state, env=env, partition=PARTITION)
    finally:
        result = subprocess.run(down, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert not state.exists(), "down.sh left the state directory behind"
        alive = {name: pid for name, pid in daemons.items() if _alive(pid)}
        assert not alive, f"still running after down.sh: {alive}"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
