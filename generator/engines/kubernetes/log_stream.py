"""One container's log as `jaxgen logs --follow` shows it: `kubectl logs -f`, followed again where
it ends while the container still runs, and read once more where the stream ends with the container,
or is given up.

A follow can end early or stop delivering: the kubelet's reader stops with an error when it cannot
watch the log file (inotify instances or watches used up on the node, "too many open files"), after
the lines the file already had; a connection to the API server can drop. The stream asks for
timestamps and shows each line without its own; a reopened stream or a second read starts at the
second of the newest line shown (the API's sinceTime has whole seconds) and skips what was shown.
`kubectl logs` reads a pod's current container, or with --previous the one before: a second read
checks the container's restart count before and after, so that it never shows another container's
lines as this one's."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time

from .kubectl import Kubectl

# The kubelet's prefix with --timestamps: RFC 3339 with up to 9 digits of the second (trailing zeros
# cut), in the node's time zone.
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ")
# A container's restart count, its start while it runs and its end once it has ended, from `kubectl get
# pod -o jsonpath` ({0} is the container's name).
_STATUS = ('{{.status.containerStatuses[?(@.name=="{0}")].restartCount}} '
           'running:{{.status.containerStatuses[?(@.name=="{0}")].state.running.startedAt}} '
           'finished:{{.status.containerStatuses[?(@.name=="{0}")].state.terminated.finishedAt}}')
READ_TIMEOUT = 30
SETTLE_SECONDS = 5.0


def _instant(match: re.Match) -> tuple[str, int]:
    """A timestamp as (its whole second, as RFC 3339; nanoseconds): one container's order as text and number."""
    return match[1] + match[3], int((match[2] or "").ljust(9, "0"))


class LogStream:
    """Follows container `container` of pod `pod`, the one of restart count `restarts`, passing each
    line to `echo`, in a thread of its own until that container ends (or stop())."""

    def __init__(self, kube: Kubectl, pod: str, container: str, restarts: int, echo):
        self.kube, self.pod, self.container, self.restarts, self.echo = kube, pod, container, restarts, echo
        self.newest: tuple[str, int] | None = None  # the newest line's instant shown, and
        self.shown_at_newest = 0  # how many lines of that instant were shown
        self.reopened = 0
        self.proc: subprocess.Popen | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _command(self, *extra: str) -> list[str]:
        since = [f"--since-time={self.newest[0]}"] if self.newest else []
        return [self.kube.binary, *self.kube.global_args, f"--namespace={self.kube.namespace}", "logs",
                f"pod/{self.pod}", "-c", self.container, "--timestamps", *since, *extra]

    def _spawn(self) -> subprocess.Popen | None:
        """A new follow from the newest line shown (None once stopped)."""
        with self._lock:
            if self._stopping:
                return None
            self.proc = subprocess.Popen(self._command("-f"), stdout=subprocess.PIPE, text=True, errors="replace")
            return self.proc

    def _follow(self) -> None:
        proc = self._spawn()
        if proc is None:
            return
        self._pump(proc.stdout)
        proc.wait()
        while (proc := self._spawn()) is not None:
            # The stream ended: with its container, or early. Followed again at once (the pod may be
            # gone in seconds), its lines held until the pod's status says whose they are.
            held: queue.Queue = queue.Queue()
            threading.Thread(target=lambda p=proc: ([held.put(line) for line in p.stdout], held.put(None)),
                             daemon=True).start()
            restarts, running, ended = self._settle()
            if restarts == self.restarts and running:  # it outlived its stream: this one's, and on
                self._pump(iter(held.get, None), unstamped=False)
                proc.wait()
                self.reopened += 1
                continue
            try:
                proc.wait(timeout=READ_TIMEOUT)  # (a follow of an ended container ends by itself)
            except subprocess.TimeoutExpired:
                pass
            self.stop()
            lines = list(iter(held.get, None))
            if restarts is None or restarts == self.restarts:  # it ended, or its pod is gone
                self._pump(lines, unstamped=False, until=ended)
            else:  # it restarted: the next container's, maybe; its own log is the previous one now
                self.catch_up()
            return

    def _settle(self) -> tuple[int | None, bool, str]:
        """The container's status once it says more than "still the one followed, running", or
        SETTLE_SECONDS after the stream's end. A stream ends with its container before the status says
        so (the kubelet reports the end, and starts a container that restarts in place, within a
        second or two): a stream opened on a stale "running" would follow the next container."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            status = self._status_now()
            if status[:2] != (self.restarts, True) or time.monotonic() >= deadline or self._stopping:
                return status
            time.sleep(min(0.5, SETTLE_SECONDS))

    def _pump(self, out, unstamped: bool = True, until: str = "") -> None:
        """Show the lines of `out` not shown yet; `unstamped`: also those without the kubelet's
        timestamp, as they are (a second read cannot tell whether they were); `until`: none after
        that second (RFC 3339, UTC)."""
        repeated = 0  # lines of the newest instant this read sent again
        for line in out:
            match = _STAMP.match(line)
            if match is None:
                if unstamped:
                    self.echo(line, nl=False)
                continue
            instant = _instant(match)
            if until and instant[0].endswith("Z") and instant[0] > until:
                break  # a later container's
            with self._lock:
                if self.newest is not None and instant <= self.newest:
                    if instant < self.newest:
                        continue  # before the newest shown: shown already
                    repeated += 1
                    if repeated <= self.shown_at_newest:
                        continue
                    self.shown_at_newest += 1
                else:
                    self.newest, self.shown_at_newest, repeated = instant, 1, 1
            self.echo(line[match.end():], nl=False)

    def _status_now(self) -> tuple[int | None, bool, str]:
        """The container's restart count now, whether it runs and when it ended ("" while it runs);
        (None, False, "") where the pod is gone (or says nothing)."""
        try:
            done = self.kube.run("get", f"pod/{self.pod}", "-o", f"jsonpath={_STATUS.format(self.container)}",
                                 check=False, timeout=READ_TIMEOUT)
        except Exception:  # noqa: BLE001  (a cluster that does not answer: nothing more to read)
            return None, False, ""
        fields = dict(f.partition(":")[::2] for f in done.stdout.split()[1:])
        restarts = done.stdout.split()[0] if done.stdout.split() else ""
        if done.returncode != 0 or not restarts.isdigit():
            return None, False, ""
        return int(restarts), bool(fields.get("running")), fields.get("finished", "")

    def catch_up(self) -> None:
        """What this container logged after the newest line shown, read once: its pod's current log
        while it has not restarted (up to the second its status says it ended: the kubelet may have
        started the next one before the status says so), the previous one once it has restarted once;
        nothing where the pod is gone, it restarted more than once, or it restarted during the read."""
        before, _, ended = self._status_now()
        if before is None or before not in (self.restarts, self.restarts + 1):
            return
        previous = ["--previous"] if before == self.restarts + 1 else []
        try:
            rest = subprocess.run(self._command(*previous), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, errors="replace", timeout=READ_TIMEOUT)
        except subprocess.TimeoutExpired:
            return
        if rest.returncode == 0 and self._status_now()[0] == before:
            self._pump(rest.stdout.splitlines(keepends=True), unstamped=False, until="" if previous else ended)

    def ended(self) -> bool:
        """Whether its container has ended and every line of it was shown."""
        return not self._reader.is_alive()

    def finish(self, timeout: float) -> None:
        """Its last lines: `timeout` seconds for the container's end (a deleted pod's stream does not
        always end by itself), else a second read (catch_up) of what the stream has not shown."""
        self._reader.join(timeout)
        if self._reader.is_alive():
            self.stop()
            self._reader.join(2 * READ_TIMEOUT)
            self.catch_up()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
