"""`jaxgen logs --follow`'s stream of one container (generator/engines/kubernetes/log_stream.py): a
stream that ends early is reopened from the newest line's second, the container's end is read once
more, and no line is lost or shown twice, lines of one instant and of one second included. The kubelet's side is a program that answers as it
does: timestamped lines (trailing zeros of the fraction cut) from --since-time's second on."""

from __future__ import annotations

import sys
import textwrap

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


def kubelet(tmp_path, cut: int):
    """A `kubectl logs -f --timestamps` stand-in: its first answer ends after `cut` lines, as a follow
    whose reader failed does; later ones send every line from --since-time's second on."""
    script = tmp_path / "kubectl-logs.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        LOG, CUT = {LOG!r}, {cut}
        calls = Path({str(tmp_path / "calls")!r})
        first = not calls.exists()
        calls.open("a").write(" ".join(sys.argv[1:]) + "\\n")
        since = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--since-time=")), None)
        if first:
            lines = LOG[:CUT]
        elif since is None:
            lines = LOG
        else:
            assert since.endswith("Z") and "." not in since, since  # the API's sinceTime: whole seconds
            lines = [line for line in LOG if line[0][:19] >= since[:19]]
        for stamp, text in lines:
            print(stamp, text, flush=True)
    """))
    return [sys.executable, str(script)], tmp_path / "calls"


def follow(command, reopen_times: int) -> tuple[list[str], LogStream]:
    shown = []
    stream = LogStream(command, lambda text, nl=True: shown.append(text))
    for _ in range(reopen_times):
        stream.proc.wait(timeout=30)
        stream.reopen()
    stream.finish(timeout=30)
    return "".join(shown).splitlines(), stream


def test_a_stream_cut_inside_a_second_loses_and_repeats_nothing(tmp_path):
    command, calls = kubelet(tmp_path, cut=3)  # cut between the two lines of one instant
    shown, stream = follow(command, reopen_times=1)
    assert shown == [text for _, text in LOG]
    assert stream.reopened == 1
    first, second, last = calls.read_text().splitlines()
    assert "-f --timestamps" in first and "--since-time" not in first
    assert second.endswith("-f --timestamps --since-time=2026-11-30T05:40:10Z"), second
    assert last == "--timestamps --since-time=2026-11-30T05:40:11Z", last  # the end's read: no -f


def test_a_stream_that_stopped_delivering_is_caught_up_at_the_containers_end(tmp_path):
    """No reopen (the stream did not end, or ended as the container did): the end's read has the rest,
    from the pod's previous container where it restarted in place."""
    command, calls = kubelet(tmp_path, cut=2)
    shown = []
    stream = LogStream(command, lambda text, nl=True: shown.append(text))
    stream.finish(timeout=30, restarted=True)
    assert "".join(shown).splitlines() == [text for _, text in LOG]
    assert calls.read_text().splitlines()[-1].endswith("--since-time=2026-11-30T05:40:10Z --previous")


def test_every_cut_and_repeated_reopens(tmp_path):
    for cut in range(len(LOG) + 1):
        (tmp_path / str(cut)).mkdir()
        command, _ = kubelet(tmp_path / str(cut), cut=cut)
        shown, _ = follow(command, reopen_times=2)  # a reopen that finds nothing new shows nothing
        assert shown == [text for _, text in LOG], cut


def test_a_line_without_the_kubelets_stamp_is_shown_once_as_it_is(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('no stamp here')\n")
    shown, _ = follow([sys.executable, str(script)], reopen_times=0)
    assert shown == ["no stamp here"]
