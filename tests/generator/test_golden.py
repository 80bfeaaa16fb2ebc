"""Golden renders of every example; rewritten only with `pytest --update-golden` (then review the diff)."""

import json

import pytest

from tests.support.paths import EXAMPLES_DIR, REPO_ROOT

from .jaxgen import jaxgen

GOLDEN_DIR = REPO_ROOT / "tests" / "generator" / "golden"
EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("*.json"))


def golden_name(example: str, target: str | None) -> str:
    return example.removesuffix(".json") + (".sbatch" if target == "slurm" else ".yaml")


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_matches_golden(example, update_golden):
    result = jaxgen("render", str(EXAMPLES_DIR / example))
    assert result.exit_code == 0, result.stderr
    target = json.loads((EXAMPLES_DIR / example).read_text()).get("target")
    golden = GOLDEN_DIR / golden_name(example, target)
    if update_golden:
        GOLDEN_DIR.mkdir(exist_ok=True)
        golden.write_text(result.stdout)
    assert golden.exists(), f"no golden file for {example}: run `make golden` and review it"
    assert result.stdout == golden.read_text(), f"{example} renders differently from {golden}"


def test_every_golden_has_an_example():
    stems = {p.stem for p in GOLDEN_DIR.iterdir()}
    assert stems == {e.removesuffix(".json") for e in EXAMPLES}
