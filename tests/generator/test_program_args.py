"""program.args without program.command: flags appended to the built-in trainer's, where the
trainer's parser lets the later one win."""

from generator.program import program_args
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR
from trainer.cli import build_parser


def test_program_args_follow_the_variables_flags_and_win():
    values = load_values([str(EXAMPLES_DIR / "seed.json")],
                         ["training.log_every=100"], set_strings=["program.args={--log-every,7,--cpu-threads,1}"])
    args = program_args(values)
    assert args[0] == "train" and args[-4:] == ["--log-every", "7", "--cpu-threads", "1"]
    parsed = build_parser().parse_args(args)
    assert (parsed.log_every, parsed.cpu_threads) == (7, 1)


def test_program_args_of_an_own_program_are_its_only_args():
    values = load_values([str(EXAMPLES_DIR / "seed.json")],
                         ["program.command={python3,/app/mine.py}", "program.args={--x}"])
    assert program_args(values) == ["--x"]
