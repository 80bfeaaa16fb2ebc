"""Every environment convention resolves to the right ClusterSpec (pure Python, no jax)."""

import re

import pytest

from tests.support.hostlist import expand_hostlist
from trainer.cluster import LAUNCHERS, first_host, resolve_cluster
from trainer.errors import ConfigError


def spec_tuple(spec):
    return spec.coordinator_address, spec.num_processes, spec.process_id


def test_single_process_default():
    spec = resolve_cluster({})
    assert spec_tuple(spec) == (None, 1, 0)
    assert not spec.distributed


def test_flags_win_over_every_environment():
    env = {"JAX_COORDINATOR_ADDRESS": "env:1", "JAX_NUM_PROCESSES": "8", "JAX_PROCESS_ID": "7",
           "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_NODELIST": "n1", "SLURM_JOB_ID": "5"}
    spec = resolve_cluster(env, coordinator_address="flag:99", num_processes=2, process_id=1)
    assert spec_tuple(spec) == ("flag:99", 2, 1)
    assert spec.sources["process_id"] == "--process-id"


def test_jax_env_indexed_job_and_jobset():
    # Our Indexed Job / JobSet set JAX_*; Kubernetes also sets JOB_COMPLETION_INDEX (same value).
    env = {"JAX_COORDINATOR_ADDRESS": "train-0.train:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "2",
           "JOB_COMPLETION_INDEX": "2"}
    assert spec_tuple(resolve_cluster(env)) == ("train-0.train:1234", 4, 2)
    env = {"JAX_COORDINATOR_ADDRESS": "t-worker-0-0.t:1234", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    spec = resolve_cluster(env)
    assert spec_tuple(spec) == ("t-worker-0-0.t:1234", 2, 1)
    assert spec.sources == {"coordinator_address": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
                            "process_id": "JAX_PROCESS_ID"}


def test_jax_env_beats_kubeflow_and_slurm():
    env = {"JAX_COORDINATOR_ADDRESS": "a:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0",
           "COORDINATOR_ADDRESS": "b", "COORDINATOR_PORT": "2", "NUM_PROCESSES": "3", "PROCESS_ID": "2"}
    assert spec_tuple(resolve_cluster(env)) == ("a:1", 2, 0)


@pytest.mark.parametrize("launcher", [la for la in LAUNCHERS if la.coordinator], ids=lambda la: la.name)
def test_a_launcher_reads_back_the_variables_it_sets(launcher):
    spec = resolve_cluster(launcher.env(2, 4, "coordinator-host", 4321))
    assert spec_tuple(spec) == ("coordinator-host:4321", 4, 2)
    assert spec.sources["process_id"] == launcher.process_id


def test_kubeflow_jaxjob_v1():
    env = {"COORDINATOR_ADDRESS": "mnist-worker-0", "COORDINATOR_PORT": "6666", "NUM_PROCESSES": "3",
           "PROCESS_ID": "2"}
    spec = resolve_cluster(env)
    assert spec_tuple(spec) == ("mnist-worker-0:6666", 3, 2)
    assert spec.sources["coordinator_address"] == "COORDINATOR_ADDRESS/COORDINATOR_PORT"


def test_indexed_job_index_with_flags_for_the_rest():
    env = {"JOB_COMPLETION_INDEX": "3"}
    spec = resolve_cluster(env, coordinator_address="job-0.job:1234", num_processes=4)
    assert spec_tuple(spec) == ("job-0.job:1234", 4, 3)
    assert spec.sources["process_id"] == "JOB_COMPLETION_INDEX"


def test_indexed_job_index_alone_is_an_error_naming_what_is_missing():
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX.*number of processes"):
        resolve_cluster({"JOB_COMPLETION_INDEX": "1"})


def test_slurm_step():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08,11],cpu1",
           "SLURM_JOB_ID": "123456", "SLURM_JOB_NODELIST": "other1"}
    spec = resolve_cluster(env)
    assert spec_tuple(spec) == (f"gpu07:{123456 % 4096 + 61440}", 4, 3)
    assert spec.sources["coordinator_address"] == "SLURM_STEP_NODELIST"


def test_slurm_port_given_by_flag_or_env():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_JOB_ID": "7"}
    assert resolve_cluster(env, coordinator_port=5555).coordinator_address == "n1:5555"
    assert resolve_cluster({**env, "JAX_COORDINATOR_PORT": "4444"}).coordinator_address == "n1:4444"


def test_slurm_falls_back_to_job_nodelist():
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "a,b", "SLURM_JOB_ID": "0"}
    assert spec_tuple(resolve_cluster(env)) == ("a:61440", 2, 1)


def test_slurm_variables_outside_a_step_are_ignored():
    # SLURM_NTASKS in an sbatch script (no srun step: no SLURM_PROCID) must not make a distributed job.
    assert spec_tuple(resolve_cluster({"SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "n[1-4]"})) == (None, 1, 0)


@pytest.mark.parametrize("spec,hosts", [
    ("node[01-03,7]", ["node01", "node02", "node03", "node7"]),
    ("n1", ["n1"]),
    ("a[1-2],b,c[09-10]-ib", ["a1", "a2", "b", "c09-ib", "c10-ib"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("gpu[007-009]", ["gpu007", "gpu008", "gpu009"]),
])
def test_expand_hostlist(spec, hosts):
    assert expand_hostlist(spec) == hosts


@pytest.mark.parametrize("bad", ["n[1-", "n]1", "n[a-b]", "n[3-1]", "n[\u0661-\u0662]", "n[1-\u0662]"])
def test_expand_hostlist_rejects_malformed_lists(bad):
    with pytest.raises(ConfigError):
        expand_hostlist(bad)


@pytest.mark.parametrize("env,kwargs,message", [
    ({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2", "JAX_COORDINATOR_ADDRESS": "h:1"}, {}, "JAX_PROCESS_ID=2 is out of range"),
    ({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, {}, "need a coordinator"),
    ({"JAX_NUM_PROCESSES": "two"}, {}, "JAX_NUM_PROCESSES='two' is not an integer"),
    ({"JAX_NUM_PROCESSES": "0"}, {}, "JAX_NUM_PROCESSES=0 must be >= 1"),
    ({"JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": "h:1"}, {}, "process id is unknown"),
    ({"JAX_COORDINATOR_ADDRESS": "h:99999", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}, {}, "JAX_COORDINATOR_ADDRESS=99999 is not a TCP port"),
    ({"COORDINATOR_ADDRESS": "h", "COORDINATOR_PORT": "x", "NUM_PROCESSES": "2", "PROCESS_ID": "1"}, {}, "COORDINATOR_PORT='x'"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, {}, "SLURM_STEP_NODELIST"),
    ({}, {"process_id": -1, "num_processes": 1}, "--process-id=-1 must be >= 0"),
    ({"JAX_NUM_PROCESSES": "1" * 20, "JAX_PROCESS_ID": "0", "JAX_COORDINATOR_ADDRESS": "h:1"}, {},
     "JAX_NUM_PROCESSES=11111111111111111111 must be <= 2147483647"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "n1", "SLURM_JOB_ID": "1"},
     {"coordinator_port": 70000}, "--coordinator-port=70000 is not a TCP port"),
    ({"JAX_COORDINATOR_ADDRESS": "h", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"},
     {"coordinator_port": 0}, "--coordinator-port=0 must be >= 1"),
    ({"JAX_COORDINATOR_PORT": "9" * 20}, {}, "JAX_COORDINATOR_PORT=99999999999999999999 is not a TCP port"),
    ({"JAX_LOCAL_DEVICE_COUNT": "100000"}, {}, "JAX_LOCAL_DEVICE_COUNT=100000 must be <= 1024"),
    ({"JAX_COORDINATOR_ADDRESS": ":::", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, {},
     "JAX_COORDINATOR_ADDRESS=':::' must be HOST:PORT"),
    ({"JAX_COORDINATOR_ADDRESS": "h:\u0663", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, {},
     "JAX_COORDINATOR_ADDRESS='h:\u0663' must be HOST:PORT"),
    ({}, {"local_device_count": 1025}, "--local-device-count=1025 must be <= 1024"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "n[\u0661-\u0662]", "SLURM_JOB_ID": "1"}, {},
     "SLURM node list item 'n[\u0661-\u0662]': bad range '\u0661-\u0662'"),
])
def test_bad_cluster_settings_name_the_variable(env, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        resolve_cluster(env, **kwargs)


@pytest.mark.parametrize("value", [" 2", "2 ", "2\n", "+2", "1_0", "\u0662", "\uff12", "9" * 5000])
@pytest.mark.parametrize("name", ["JAX_NUM_PROCESSES", "SLURM_NTASKS", "JAX_LOCAL_DEVICE_COUNT", "JAX_COORDINATOR_PORT"])
def test_launcher_integers_are_ascii_digits_only(name, value):
    env = {name: value, "SLURM_PROCID": "0"} if name.startswith("SLURM") else {name: value}
    with pytest.raises(ConfigError, match=f"^{re.escape(f'{name}={value!r} is not an integer')}$"):
        resolve_cluster(env)


@pytest.mark.parametrize("nodes,coordinator", [("n[1-" + "9" * 5000 + "]", "n1:"), ("n[" + "0" * 5000 + "7-8]", "n" + "0" * 5000 + "7:")])
def test_a_slurm_node_range_of_thousands_of_digits_is_read(nodes, coordinator):
    """int() refuses more than 4300 digits (leading zeros count): such a range's bounds ended in a
    ValueError traceback; they compare at any length."""
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": nodes, "SLURM_JOB_ID": "1"}
    assert resolve_cluster(env).coordinator_address.startswith(coordinator)
    descending = {**env, "SLURM_STEP_NODELIST": "n[" + "9" * 5000 + "-1]"}
    with pytest.raises(ConfigError, match="is descending"):
        resolve_cluster(descending)


def test_slurm_coordinator_reads_only_the_first_host():
    import time

    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "gpu[007-99999999]-ib,x",
           "SLURM_JOB_ID": "1"}
    started = time.monotonic()
    assert resolve_cluster(env).coordinator_address == "gpu007-ib:61441"
    assert time.monotonic() - started < 10  # the first host only: expanding them all would take minutes
    with pytest.raises(ConfigError, match="descending"):
        resolve_cluster({**env, "SLURM_STEP_NODELIST": "n[1,9-3]"})


@pytest.mark.parametrize("spec", ["node[01-03,7]", "a[1-2],b", "r[2-3]n[07-9]-ib", " ,n1", "x"])
def test_first_host_is_the_first_of_the_expansion(spec):
    assert first_host(spec) == expand_hostlist(spec)[0]


def test_coordinator_without_port_gets_the_given_or_default_port():
    env = {"JAX_COORDINATOR_ADDRESS": "host", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}
    assert resolve_cluster(env).coordinator_address == "host:1234"
    assert resolve_cluster(env, coordinator_port=4321).coordinator_address == "host:4321"


def test_cluster_module_does_not_import_jax():
    import subprocess
    import sys

    code = "import sys, trainer.cli, trainer.cluster; sys.exit('jax' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


from hypothesis import given, settings, strategies as st  # noqa: E402

_ranges = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=4)


@settings(deadline=None)  # a loaded machine stalls an example past hypothesis' 200 ms, then calls it flaky
@given(prefix=st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True), ranges=_ranges,
       suffix=st.sampled_from(["", "-ib"]), plain=st.lists(st.from_regex(r"[a-z]{1,5}", fullmatch=True), max_size=2))
def test_expand_hostlist_matches_a_direct_enumeration(prefix, ranges, suffix, plain):
    body = ",".join(f"{lo:0{w}d}" if n == 0 else f"{lo:0{w}d}-{lo + n:0{w}d}" for lo, n, w in ranges)
    expected = [f"{prefix}{i:0{w}d}{suffix}" for lo, n, w in ranges for i in range(lo, lo + n + 1)]
    spec = ",".join([f"{prefix}[{body}]{suffix}", *plain])
    assert expand_hostlist(spec) == expected + plain


def test_indexed_job_without_an_address_finds_pod_0_under_its_headless_service():
    env = {"JOB_COMPLETION_INDEX": "3", "JAX_NUM_PROCESSES": "4", "JAX_COORDINATOR_PORT": "4321"}
    spec = resolve_cluster(env, fqdn=lambda: "train-3.train.team-a.svc.cluster.local")
    assert spec_tuple(spec) == ("train-0.train.team-a.svc.cluster.local:4321", 4, 3)
    assert spec.sources["coordinator_address"] == "JOB_COMPLETION_INDEX/hostname"
    # A JobSet pod: <jobset>-<replicated job>-<job index>-<pod index>.<jobset>
    spec = resolve_cluster({"JOB_COMPLETION_INDEX": "1", "NUM_PROCESSES": "2"}, fqdn=lambda: "js-workers-0-1.js")
    assert spec.coordinator_address == "js-workers-0-0.js:1234"
    # An address given wins; a single process needs none.
    assert resolve_cluster({**env, "JAX_COORDINATOR_ADDRESS": "c:1"}, fqdn=lambda: "x").coordinator_address == "c:1"
    assert resolve_cluster({"JOB_COMPLETION_INDEX": "0", "JAX_NUM_PROCESSES": "1"}, fqdn=lambda: "x").distributed is False


@pytest.mark.parametrize("fqdn", ["train-3", "train-13.train", "other.train"])
def test_indexed_job_pod_name_that_is_not_job_index_under_a_subdomain_is_refused(fqdn):
    with pytest.raises(ConfigError, match=r"JOB_COMPLETION_INDEX=3 but this pod's name .* set JAX_COORDINATOR_ADDRESS"):
        resolve_cluster({"JOB_COMPLETION_INDEX": "3", "JAX_NUM_PROCESSES": "4"}, fqdn=lambda: fqdn)


def test_local_device_count_from_flag_then_environment():
    assert resolve_cluster({"JAX_LOCAL_DEVICE_COUNT": "4"}).local_device_count == 4
    spec = resolve_cluster({"JAX_LOCAL_DEVICE_COUNT": "4"}, local_device_count=2)
    assert (spec.local_device_count, spec.sources["local_device_count"]) == (2, "--local-device-count")
    with pytest.raises(ConfigError, match="JAX_LOCAL_DEVICE_COUNT='two' is not an integer"):
        resolve_cluster({"JAX_LOCAL_DEVICE_COUNT": "two"})
