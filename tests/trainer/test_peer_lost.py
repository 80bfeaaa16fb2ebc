"""Which errors of a distributed run mean that a peer died: every collective's, wherever it runs (a
training step, the stop agreement, evaluation, a checkpoint), and nothing else."""

from trainer import exit_codes
from trainer.errors import as_peer_lost


class JaxRuntimeError(RuntimeError):
    """Stands in for jax's own class, which as_peer_lost recognises by name (jaxlib is not imported)."""


def test_a_failed_collective_is_a_lost_peer():
    for error in (JaxRuntimeError("UNAVAILABLE: Connection reset by peer\nmore"),
                  ValueError("UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error: Connection reset by peer")):
        lost = as_peer_lost(error)
        assert lost is not None and lost.exit_code == exit_codes.PEER_LOST
        assert str(lost).startswith("a collective failed, a peer process died or became unreachable: ")
        assert "\n" not in str(lost)


def test_other_errors_are_not():
    for error in (ValueError("invalid literal for int()"), RuntimeError("Gloo"), KeyError("x")):
        assert as_peer_lost(error) is None
