"""The targets are listed once, in the chart README's target table, which `make generate` writes from
generator/targets.py (tests/generator/test_generated_files.py holds it current); other docs link to it.
A target's docs are in its row: what a cluster needs for it (Needs), which the table shows with the
commands that install it."""

from __future__ import annotations

import re

import pytest

from generator import targets
from tests.support.paths import CHART_DIR, REPO_ROOT

TARGETS_TABLE = "charts/jax-training/README.md#targets"


def generated_table() -> str:
    text = (CHART_DIR / "README.md").read_text()
    return text.split("<!-- targets-table:begin", 1)[1].split("<!-- targets-table:end -->", 1)[0]


def table_names(table: str) -> list[str]:
    """The first column's names, below the header row."""
    return re.findall(r"^\| `([\w-]+)`", table.split("|---", 1)[1], re.M)


def test_the_generated_table_lists_every_target_once_in_order():
    assert table_names(generated_table()) == list(targets.NAMES)


@pytest.mark.parametrize("name", targets.NAMES)
def test_every_target_says_what_it_needs_and_its_row_shows_it(name):
    needs = targets.TARGETS[name].needs
    assert needs.what != "nothing" or needs.version, f"target {name}: its row's Needs says nothing"
    assert not needs.guide or (REPO_ROOT / needs.guide).is_file(), f"target {name}: {needs.guide} is missing"
    for command in needs.install if needs.version else ():
        assert f"${{{needs.version}}}" in command, f"target {name}: {command!r} installs another version than {needs.version}"
    table = generated_table()
    (row,) = [line for line in table.splitlines() if line.startswith(f"| `{name}`")]
    assert needs.what in row and needs.version in row and needs.guide in row
    assert all(command in table for command in needs.install)


@pytest.mark.parametrize("name", targets.KUBERNETES)
def test_the_generated_row_names_the_object_and_its_pods(name):
    w = targets.TARGETS[name].workload
    (row,) = [line for line in generated_table().splitlines() if line.startswith(f"| `{name}`")]
    assert f"`{w.kind}` (`{w.resource}`)" in row and f"`{w.hosts.host('<name>', '<i>')}`" in row


@pytest.mark.parametrize("path", ["README.md", "docs/own-program.md", "docs/your-cluster.md"])
def test_the_user_docs_link_to_the_table(path):
    text = (REPO_ROOT / path).read_text()
    assert TARGETS_TABLE in text, f"{path} does not link to the target table"


def test_the_docs_name_the_uid_the_renders_run_as():
    """Every uid the user docs name is the one every golden render's pods run as (runAsUser)."""
    rendered = {int(n) for f in (REPO_ROOT / "tests" / "generator" / "golden").glob("*.yaml")
                for n in re.findall(r"runAsUser: (\d+)", f.read_text())}
    assert len(rendered) == 1, rendered
    said = {(path.name, int(n)) for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
            for n in re.findall(r"\buid (\d+)", path.read_text())}
    assert said and all(uid in rendered for _, uid in said), (said, rendered)
