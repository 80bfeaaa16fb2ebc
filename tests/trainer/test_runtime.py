"""Device-count checks, the coordinator probe and the compilation cache's keying, without a cluster."""

import shutil
import socket
import time
from types import SimpleNamespace

import pytest

from trainer.cluster import ClusterSpec
from trainer.errors import CoordinatorError, DeviceCountError
from trainer.runtime import (check_devices, compilation_cache_key, jax_versions, own_address, source_digest,
                             wait_for_coordinator)


def fake_jax(local, total, processes, index=0):
    return SimpleNamespace(local_device_count=lambda: local, device_count=lambda: total,
                           process_count=lambda: processes, process_index=lambda: index)


def test_matching_device_counts_pass():
    check_devices(fake_jax(2, 4, 2), ClusterSpec("h:1", 2, 0, 2))


@pytest.mark.parametrize("jax,spec,message", [
    (fake_jax(2, 2, 1), ClusterSpec("h:1", 2, 0, 2), "2 global devices, expected 2 processes x 2 local = 4"),
    (fake_jax(1, 2, 2), ClusterSpec("h:1", 2, 0, 2), "1 local devices, --local-device-count asks for 2"),
    (fake_jax(1, 2, 2, index=1), ClusterSpec("h:1", 2, 0, 1), "JAX reports process 1/2, expected 0/2"),
    (fake_jax(1, 2, 2), ClusterSpec("h:1", 2, 0, 2, {"local_device_count": "JAX_LOCAL_DEVICE_COUNT"}),
     "1 local devices, JAX_LOCAL_DEVICE_COUNT asks for 2"),
])
def test_wrong_device_counts_are_refused(jax, spec, message):
    with pytest.raises(DeviceCountError, match=message):
        check_devices(jax, spec)


def test_probe_returns_once_the_coordinator_listens():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        left, address = wait_for_coordinator(f"localhost:{port}", 10, print)
    assert 1.0 <= left <= 10
    assert address == f"127.0.0.1:{port}"  # the IP that answered, for JAX's client


def test_probe_tries_every_address_of_the_name(monkeypatch):
    """A name that still lists a replaced pod's address first: the one that answers is found."""
    import trainer.runtime as runtime

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.socket() as closed:  # a port of this host where nothing listens
            closed.bind(("127.0.0.2", 0))
            dead = closed.getsockname()[1]
        stale = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", dead))
        live = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))
        monkeypatch.setattr(runtime.socket, "getaddrinfo", lambda *a, **k: [stale, live])
        _, address = wait_for_coordinator(f"coordinator.example:{port}", 5, print)
    assert address == f"127.0.0.1:{port}"


def test_the_coordinator_finds_its_own_address():
    assert own_address("localhost:1234") == "127.0.0.1:1234"
    # only another host's (a Service's ClusterIP in front of this process): itself, on the loopback
    assert own_address("192.0.2.1:1234") == "127.0.0.1:1234"
    assert own_address("no-such-host.invalid:1234") == "no-such-host.invalid:1234"


def test_probe_gives_up_after_the_timeout_with_a_clear_message():
    started = time.monotonic()
    with pytest.raises(CoordinatorError, match=r"coordinator no-such-host\.invalid:1234 did not come up within the init timeout of 1.5 s"):
        wait_for_coordinator("no-such-host.invalid:1234", 1.5, print)
    assert time.monotonic() - started < 2.5


def test_probe_keeps_to_its_deadline_and_paces_its_attempts(monkeypatch):
    """A lookup that hangs (a resolver with long timeouts) ends at the deadline, and failed attempts
    are spaced: the gap doubles from the first one up to retry_every, never a spin in the last
    milliseconds."""
    import trainer.runtime as runtime

    lookups = []

    def slow_lookup(*args, **kwargs):
        lookups.append(time.monotonic())
        if len(lookups) > 4:
            time.sleep(30)
        raise socket.gaierror("temporary failure in name resolution")

    monkeypatch.setattr(runtime.socket, "getaddrinfo", slow_lookup)
    started = time.monotonic()
    with pytest.raises(CoordinatorError, match="did not come up"):
        wait_for_coordinator("late-pod.example:1234", 1.5, print, retry_every=0.4, first_retry=0.1)
    assert time.monotonic() - started < 3  # the deadline, not the hung lookup's 30 s (margin for a loaded host)
    # 0, 0.1, 0.3, 0.7, 1.1 s: the fifth hangs. A fixed 0.4 s gap makes 4 lookups by 1.5 s, a gap
    # that doubles without its cap 4 (the fifth would be due at 1.5 s), a spin hundreds.
    assert len(lookups) == 5, [round(t - lookups[0], 3) for t in lookups]
    gaps = [b - a for a, b in zip(lookups, lookups[1:])]
    # (a lookup runs in a thread of its own, which may start late on a busy machine: the gap after it
    # is that much shorter)
    assert all(gap >= least - 0.03 for gap, least in zip(gaps, [0.1, 0.2, 0.4, 0.4])), gaps


VERSIONS = {"jax": "0.10.2", "jaxlib": "0.10.2"}


@pytest.mark.parametrize("changed", [
    {"versions": {**VERSIONS, "jax": "0.10.3"}}, {"versions": {**VERSIONS, "jaxlib": "0.10.3"}},
    {"versions": {**VERSIONS, "jax-cuda12-plugin": "0.10.2"}}, {"platform": "gpu"}, {"source": "1" * 64},
], ids=["jax", "jaxlib", "plugin", "platform", "program"])
def test_a_changed_program_jax_or_backend_has_a_cache_folder_of_its_own(changed):
    """The persistent compilation cache's folder: another JAX or jaxlib, plugin, platform or trainer
    source never reads the entries of another; the same ones always find theirs."""
    same = {"platform": "cpu", "versions": VERSIONS, "source": "0" * 64}
    assert compilation_cache_key(**same) == compilation_cache_key(**same)
    assert compilation_cache_key(**same).startswith("jax0.10.2-cpu-")
    assert compilation_cache_key(**{**same, **changed}) != compilation_cache_key(**same)


def test_the_cache_folder_follows_the_trainers_source(tmp_path):
    """The source digest: an identical copy of the trainer is the same program, one changed byte or a
    file more is another; the folder of the installed trainer is named by it and this JAX."""
    import trainer

    package = tmp_path / "trainer"
    shutil.copytree(trainer.__path__[0], package, ignore=shutil.ignore_patterns("__pycache__"))
    assert source_digest(package) == source_digest()
    (package / "models" / "__init__.py").write_text((package / "models" / "__init__.py").read_text() + "\n")
    changed = source_digest(package)
    assert changed != source_digest()
    (package / "extra.py").write_text("")
    assert source_digest(package) not in (changed, source_digest())
    assert compilation_cache_key("cpu") == compilation_cache_key("cpu", jax_versions("cpu"), source_digest())
    assert compilation_cache_key("cpu") != compilation_cache_key("cpu", jax_versions("cpu"), changed)


def test_the_shared_cpu_cache_key_names_the_host_cpu_and_the_layout_not_the_process(monkeypatch):
    """Every process of a CPU job computes one key for one layout (so all read process 0's programs),
    while a host of other CPU features gets another key (it must never load code its CPU cannot run)."""
    import hashlib

    from jax._src import cache_key

    from trainer import runtime

    def key(features, devices):
        monkeypatch.setattr(runtime, "cpu_features", lambda: features)
        monkeypatch.setattr(cache_key, "_hash_accelerator_config", cache_key._hash_accelerator_config)
        assert runtime.share_cpu_entries()
        digest = hashlib.sha256()
        cache_key._hash_accelerator_config(digest, devices)
        return digest.hexdigest()

    class Devices(list):
        flat = property(lambda self: iter(self))

    def layout(*placement):  # (device id, process) per device
        return Devices(SimpleNamespace(device_kind="cpu", id=i, process_index=p) for i, p in placement)

    two_by_one = layout((0, 0), (1, 1))
    assert key("x86_64:avx2", two_by_one) == key("x86_64:avx2", layout((0, 0), (1, 1)))
    assert key("x86_64:avx2", two_by_one) != key("x86_64:avx2 avx512f", two_by_one)
    assert key("x86_64:avx2", two_by_one) != key("x86_64:avx2", layout((0, 0), (1, 0)))
    assert runtime.cpu_features().startswith(f"{__import__('platform').machine()}:")
