"""Which errors of a distributed run mean that a peer died: every collective's and coordination call's,
wherever it runs (a training step, the stop agreement, evaluation, a checkpoint), JAX's fatal line
(trainer/supervisor.py), and nothing else. The texts are the ones jax 0.10 gave when the faults of
tests/trainer/test_coordination_failures.py were injected."""

import pytest

from trainer import exit_codes
from trainer.errors import PEER_LOST_SIGNS, as_peer_lost, first_line, peer_lost_cause


class JaxRuntimeError(RuntimeError):
    """Stands in for jax's own class, which as_peer_lost recognises by name (jaxlib is not imported)."""


SEEN = [  # (text, the cause it must be given)
    ("UNKNOWN: Gloo all-reduce failed: [external/gloo/gloo/transport/tcp/pair.cc:538] Read error "
     "[127.0.0.1]:14210: Connection reset by peer", "a collective failed"),
    ("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer "
     "[127.0.0.1]:54994", "a collective failed"),
    ("Terminating process because the JAX distributed service detected fatal errors. absl::Status: "
     "DEADLINE_EXCEEDED: Deadline Exceeded\n\nRPC: /xla.coordination.CoordinationService/Heartbeat",
     "the coordinator stopped answering heartbeats"),
    ("Terminating process because the JAX distributed service detected fatal errors. absl::Status: UNAVAILABLE: "
     "The following tasks are unhealthy (stopped sending heartbeats):\n1\nThe tasks have crashed.",
     "a peer stopped sending heartbeats"),
    ("Terminating process because the JAX distributed service detected fatal errors. absl::Status: UNAVAILABLE: "
     "Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted "
     "unexpectedly or this task is experiencing network issues.", "the coordinator became unreachable"),
]


@pytest.mark.parametrize("text, cause", SEEN)
def test_each_seen_failure_is_named(text, cause):
    assert peer_lost_cause(text).startswith(cause)


def test_a_failed_collective_is_a_lost_peer():
    for error in (JaxRuntimeError(SEEN[0][0] + "\nmore"), ValueError(SEEN[1][0]),
                  JaxRuntimeError("DEADLINE_EXCEEDED: Barrier timed out"), JaxRuntimeError("UNAVAILABLE: Socket closed")):
        lost = as_peer_lost(error)
        assert lost is not None and lost.exit_code == exit_codes.PEER_LOST
        assert "\n" not in str(lost) and str(lost).split(": ", 1)[0] in [cause for _, cause in PEER_LOST_SIGNS]


def test_other_errors_are_not():
    for error in (ValueError("invalid literal for int()"), RuntimeError("Gloo"), KeyError("x"),
                  JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes"),
                  JaxRuntimeError("INVALID_ARGUMENT: Executable expected parameter 0 of size 8")):
        assert as_peer_lost(error) is None


def test_an_error_is_reported_by_its_first_line_or_its_type():
    """errors.first_line, how every one-line report quotes the error it caught (a lost peer's above)."""
    assert first_line(ValueError("\n  bad header\nline 2")) == "bad header"
    assert first_line(OSError()) == "OSError" and first_line(KeyError("")) == "''"
    assert first_line(RuntimeError("x" * 500)) == "x" * 300 and first_line(RuntimeError("x" * 500), 200) == "x" * 200
