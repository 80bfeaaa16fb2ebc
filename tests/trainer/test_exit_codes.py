"""How an exit is put in words wherever a run's end is reported (`jaxgen run`'s supervisor, `jaxgen
status --local` and `--slurm`): from trainer/exit_codes.py's table, or the signal a code above 128 stands for."""

import pytest

from trainer import exit_codes
from trainer.exit_codes import describe_exit


@pytest.mark.parametrize(("code", "words"), [
    (0, "exit code 0"),
    (6, f"exit code 6: {exit_codes.BY_NAME['checkpoint'].meaning}"),
    (141, f"exit code 141: {exit_codes.BY_NAME['peer-lost'].meaning}"),
    (134, "exit code 134 (killed by SIGABRT)"),
    (137, "exit code 137 (killed by SIGKILL)"),
    (200, "exit code 200"),
    (-9, "killed by SIGKILL"),
    (-99, "killed by signal 99"),
])
def test_an_exit_is_said_from_the_table_or_its_signal(code, words):
    assert describe_exit(code) == words
