"""One container's log as `jaxgen logs --follow` shows it: `kubectl logs -f`, reopened where it
ends while the container still runs, and read once more at the container's end.

A follow can end early: the kubelet's reader stops with an error when it cannot watch the log file
(inotify instances or watches used up on the node, "too many open files"), after the lines the file
already had; a connection to the API server can drop. The stream asks for timestamps, shows each line
without its own, and a reopened stream starts at the second of the newest line shown (the API's
sinceTime has whole seconds) and skips what was shown already."""

from __future__ import annotations

import re
import subprocess
import threading

# The kubelet's prefix with --timestamps: RFC 3339 with up to 9 digits of the second (trailing zeros
# cut), in the node's time zone.
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ")


def _instant(match: re.Match) -> tuple[str, int]:
    """A timestamp as (its whole second, as RFC 3339; nanoseconds): one container's order as text and number."""
    return match[1] + match[3], int((match[2] or "").ljust(9, "0"))


class LogStream:
    """Follows one container (`args`: kubectl's command line without -f), passing each line to `echo`."""

    def __init__(self, command: list[str], echo):
        self.command, self.echo = command, echo
        self.newest: tuple[str, int] | None = None  # the newest line's instant shown, and
        self.shown_at_newest = 0  # how many lines of that instant were shown
        self.reopened = 0
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        since = [f"--since-time={self.newest[0]}"] if self.newest else []
        self.proc = subprocess.Popen([*self.command, "-f", "--timestamps", *since], stdout=subprocess.PIPE,
                                     text=True, errors="replace")
        self._reader = threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _pump(self, out, unstamped: bool = True) -> None:
        """Show the lines of `out` not shown yet; `unstamped`: also those without the kubelet's
        timestamp, as they are (a second read cannot tell whether they were)."""
        repeated = 0  # lines of the newest instant this stream sent again
        for line in out:
            match = _STAMP.match(line)
            if match is None:
                if unstamped:
                    self.echo(line, nl=False)
                continue
            instant = _instant(match)
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

    def ended(self) -> bool:
        return self.proc.poll() is not None

    def reopen(self) -> None:
        """After an early end: the rest, from the newest line's second on."""
        self._reader.join()  # every line of the ended stream is shown first
        self.reopened += 1
        self._open()

    def finish(self, timeout: float, restarted: bool = False) -> None:
        """Its last lines: the stream's, `timeout` seconds at most (a deleted pod's stream does not
        always end by itself), then what the container logged after the newest line shown, read once
        (`restarted`: the container has restarted in place, so its log is the pod's previous one),
        in case the stream stopped delivering without ending. Nothing where the pod is gone."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
        self._reader.join(timeout)
        since = [f"--since-time={self.newest[0]}"] if self.newest else []
        try:
            rest = subprocess.run([*self.command, "--timestamps", *since, *(["--previous"] if restarted else [])],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace",
                                  timeout=30)
        except subprocess.TimeoutExpired:
            return
        if rest.returncode == 0:
            self._pump(rest.stdout.splitlines(keepends=True), unstamped=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
