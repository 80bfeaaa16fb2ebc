"""Golden renders of every example; rewritten only with `pytest --update-golden` (then review the diff)."""

import pytest

from generator.targets import KUBERNETES
from tests.support.examples import target_of
from tests.support.jaxgen import jaxgen
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT

GOLDEN_DIR = REPO_ROOT / "tests" / "generator" / "golden"
EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("*.json"))


def golden_name(example: str, target: str) -> str:
    return example.removesuffix(".json") + (".yaml" if target in KUBERNETES else ".sbatch")


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_matches_golden(example, update_golden):
    result = jaxgen("render", str(EXAMPLES_DIR / example))
    assert result.exit_code == 0, result.stderr
    golden = GOLDEN_DIR / golden_name(example, target_of(EXAMPLES_DIR / example))
    if update_golden:
        GOLDEN_DIR.mkdir(exist_ok=True)
        golden.write_text(result.stdout)
    assert golden.exists(), f"no golden file for {example}: run `make golden` and review it"
    assert result.stdout == golden.read_text(), f"{example} renders differently from {golden}"


def test_every_golden_has_an_example():
    stems = {p.stem for p in GOLDEN_DIR.iterdir()}
    assert stems == {e.removesuffix(".json") for e in EXAMPLES}
