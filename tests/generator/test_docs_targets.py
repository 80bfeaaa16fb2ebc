"""The targets are listed once, in the chart README's target table, which `make generate` writes from
generator/targets.py (tests/generator/test_generated_files.py holds it current); other docs link to it.
What a new target must bring beside its row: its docs (a page docs/<target>.md, or its row in
docs/your-cluster.md's table of what each target needs installed)."""

from __future__ import annotations

import re

import pytest

from generator import targets
from tests.support.paths import CHART_DIR, REPO_ROOT

DOCS = REPO_ROOT / "docs"
TARGETS_TABLE = "charts/jax-training/README.md#targets"


def generated_table() -> str:
    text = (CHART_DIR / "README.md").read_text()
    return text.split("<!-- targets-table:begin", 1)[1].split("<!-- targets-table:end -->", 1)[0]


def table_names(table: str) -> list[str]:
    """The first column's names, below the header row."""
    return re.findall(r"^\| `([\w-]+)`", table.split("|---", 1)[1], re.M)


def setup_rows() -> list[str]:
    """The targets of docs/your-cluster.md's "What each target needs" table."""
    text = (DOCS / "your-cluster.md").read_text()
    section = text.split("## 1. What each target needs", 1)[1].split("\n## ", 1)[0]
    return table_names(section)


def test_the_generated_table_lists_every_target_once_in_order():
    assert table_names(generated_table()) == list(targets.NAMES)


@pytest.mark.parametrize("name", targets.NAMES)
def test_every_target_has_its_docs(name):
    assert (DOCS / f"{name}.md").is_file() or name in setup_rows(), (
        f"target {name} has no docs: add docs/{name}.md or its row to docs/your-cluster.md's table")


@pytest.mark.parametrize("name", targets.KUBERNETES)
def test_the_generated_row_names_the_object_and_its_pods(name):
    w = targets.TARGETS[name].workload
    (row,) = [line for line in generated_table().splitlines() if line.startswith(f"| `{name}`")]
    assert f"`{w.kind}` (`{w.resource}`)" in row and f"`{w.hosts.host('<name>', '<i>')}`" in row


@pytest.mark.parametrize("path", ["README.md", "docs/own-program.md"])
def test_the_user_docs_link_to_the_table(path):
    text = (REPO_ROOT / path).read_text()
    assert TARGETS_TABLE in text, f"{path} does not link to the target table"
