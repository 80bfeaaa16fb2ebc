"""`jaxgen logs --follow`'s stream of one container (generator/engines/kubernetes/log_stream.py): a
stream that ends early is followed again from the newest line's second, and one that ends with its
container or stops delivering is read once more, and no line is lost or shown twice, lines of one instant and of one second included; a second read never shows another
container's lines. The cluster's side is a `kubectl` stand-in that answers as the kubelet and the
API server do: timestamped lines (trailing zeros of the fraction cut) from --since-time's second on,
the pod's current or previous container, its restart count."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from generator.engines.kubernetes import log_stream
from generator.engines.kubernetes.log_stream import LogStream

# The container's log as the kubelet stores it: three lines in one second, two of one instant.
LOG = [
    ("2026-11-30T05:40:09.999Z", "starting"),
    ("2026-11-30T05:40:10.1Z", "step 1"),
    ("2026-11-30T05:40:10.12Z", "step 2"),
    ("2026-11-30T05:40:10.12Z", "step 2 again"),
    ("2026-11-30T05:40:10.5Z", "step 3"),
    ("2026-11-30T05:40:11Z", "step 4"),
]
NEXT = [("2026-11-30T05:40:13Z", "the next container's first line")]  # after a restart in place

KUBECTL = """
import sys, time
from pathlib import Path
LOG, NEXT, CUT = {log!r}, {next!r}, {cut}
state = Path({state!r})
args = sys.argv[1:]
(state / "calls").open("a").write(" ".join(a for a in args if not a.startswith("--namespace")) + "\\n")
if (state / "gone").exists():
    sys.exit(1)
restarts = int((state / "restarts").read_text())
if "get" in args:  # the status: restart count, start while the container runs, end once it ended
    exited = (state / "exited").exists()
    lag = state / "status-lags-until"
    if lag.exists() and time.time() < float(lag.read_text()):  # the kubelet has not reported the restart yet
        restarts, exited = restarts - 1, False
    print(restarts, "running:" + ("" if exited else "2026-11-30T05:40:00Z"),
          "finished:" + ("2026-11-30T05:40:11Z" if exited else ""))
    sys.exit(0)
if (state / "restart-during-read").exists():  # the next container starts while this read runs
    (state / "restart-during-read").unlink()
    (state / "restarts").write_text(str(restarts + 1))
since = next((a.split("=", 1)[1] for a in args if a.startswith("--since-time=")), None)
lines = LOG if restarts == 0 or "--previous" in args else NEXT
first = "-f" in args and not (state / "followed").exists()
if first:
    (state / "followed").touch()
    lines = lines[:CUT]  # the first follow ends early
elif since is not None:
    assert since.endswith("Z") and "." not in since, since  # the API's sinceTime: whole seconds
    lines = [line for line in lines if line[0][:19] >= since[:19]]
for stamp, text in lines:
    print(stamp, text, flush=True)
if first:
    for then in ("gone", "restarts", "hang"):  # what the test has happen at the early end
        if (state / f"{{then}}-after-cut").exists():
            if then == "restarts":  # the container ends there and restarts in place
                (state / "restarts").write_text("1")
                if (state / "status-lags").exists():
                    (state / "status-lags-until").write_text(str(time.time() + 1.5))
            elif then == "hang":
                time.sleep(600)  # a stream that stops delivering without ending
            else:
                (state / then).touch()
elif "-f" in args:  # a follow that is not cut ends with the container, a moment later
    time.sleep(1.5 if (state / "runs-on").exists() else 0)
    (state / "exited").touch()
"""


@pytest.fixture(autouse=True)
def quick_settle(monkeypatch):
    """A container outlives its stream after 0.5 s here (5 s on a cluster, where statuses lag)."""
    monkeypatch.setattr(log_stream, "SETTLE_SECONDS", 0.5)


class Kube:
    """What LogStream uses of a Kubectl, with the stand-in as its binary."""

    def __init__(self, binary: Path):
        self.binary, self.global_args, self.namespace = str(binary), [], "ns"

    def run(self, *args, check=True, timeout=30):
        return subprocess.run([self.binary, f"--namespace={self.namespace}", *args], capture_output=True, text=True,
                              timeout=timeout)


def cluster(tmp_path: Path, cut: int) -> Kube:
    (tmp_path / "restarts").write_text("0")
    script = tmp_path / "kubectl"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(KUBECTL).format(log=LOG, next=NEXT, cut=cut,
                                                                               state=str(tmp_path)))
    script.chmod(0o755)
    return Kube(script)


def follow(kube: Kube, timeout: float = 60) -> tuple[list[str], LogStream]:
    shown = []
    stream = LogStream(kube, "p", "jax", 0, lambda text, nl=True: shown.append(text))
    stream.finish(timeout)
    return "".join(shown).splitlines(), stream


def happens_after_cut(kube: Kube, what: str) -> None:
    (Path(kube.binary).parent / f"{what}-after-cut").touch()


@pytest.mark.parametrize("cut", range(len(LOG) + 1))
def test_a_stream_cut_anywhere_is_followed_again_and_loses_and_repeats_nothing(tmp_path, cut):
    shown, stream = follow(cluster(tmp_path, cut))
    assert shown == [text for _, text in LOG] and stream.ended()
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "logs pod/p -c jax --timestamps -f"
    if cut:  # followed again from the second of the newest line shown
        newest = LOG[cut - 1][0][:19] + "Z"
        assert f"logs pod/p -c jax --timestamps --since-time={newest} -f" in calls, calls


def test_a_stream_that_ends_while_its_container_runs_on_goes_on_live(tmp_path):
    kube = cluster(tmp_path, cut=2)
    (tmp_path / "runs-on").touch()
    shown, stream = follow(kube)
    assert shown == [text for _, text in LOG] and stream.reopened == 1


def test_a_container_that_restarts_in_place_is_read_to_its_end_from_the_previous_log(tmp_path):
    kube = cluster(tmp_path, cut=2)
    happens_after_cut(kube, "restarts")
    shown, stream = follow(kube)
    assert shown == [text for _, text in LOG] and stream.reopened == 0  # not the next container's line
    assert "logs pod/p -c jax --timestamps --since-time=2026-11-30T05:40:10Z --previous" in (
        tmp_path / "calls").read_text().splitlines()


def test_a_stream_that_ends_before_the_status_says_the_container_restarted_waits_for_it(tmp_path, monkeypatch):
    """The next container runs (its log is the current one) while the status still says the old one
    runs: followed again at once, the next container's line would be shown as this one's."""
    monkeypatch.setattr(log_stream, "SETTLE_SECONDS", 4.0)
    kube = cluster(tmp_path, cut=2)
    happens_after_cut(kube, "restarts")
    (tmp_path / "status-lags").touch()
    shown, stream = follow(kube)
    assert shown == [text for _, text in LOG] and stream.reopened == 0


def test_a_stream_that_stops_delivering_is_read_again_when_given_up(tmp_path):
    kube = cluster(tmp_path, cut=2)
    happens_after_cut(kube, "hang")
    shown, _ = follow(kube, timeout=3)
    assert shown == [text for _, text in LOG]


def test_a_read_the_container_restarted_during_is_not_shown(tmp_path):
    kube = cluster(tmp_path, cut=len(LOG))
    shown = []
    stream = LogStream(kube, "p", "jax", 0, lambda text, nl=True: shown.append(text))
    stream.finish(60)
    (tmp_path / "exited").unlink()
    (tmp_path / "restart-during-read").touch()
    shown.clear()
    stream.newest, stream.shown_at_newest = (LOG[0][0][:19] + "Z", 999_000_000), 1  # only "starting" shown
    stream.catch_up()
    assert shown == []  # the read began on container 0 and ended on container 1: not known whose
    stream.catch_up()  # once it has restarted: the previous container's
    assert "".join(shown).splitlines() == [text for _, text in LOG[1:]]


def test_nothing_more_and_no_error_where_the_pod_is_gone(tmp_path):
    kube = cluster(tmp_path, cut=2)
    happens_after_cut(kube, "gone")
    shown, stream = follow(kube)
    assert shown == [text for _, text in LOG[:2]] and stream.ended()


def test_a_line_without_the_kubelets_stamp_is_shown_once_as_it_is(tmp_path):
    kube = cluster(tmp_path, cut=0)
    script = Path(kube.binary)
    script.write_text(f"#!{sys.executable}\nprint('no stamp here')\n")
    happens_after_cut(kube, "gone")
    shown, _ = follow(kube)
    assert shown == ["no stamp here"]
