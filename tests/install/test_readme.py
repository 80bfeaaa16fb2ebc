"""The README is a user's: one page in a fixed order, a first screen with the two commands a fresh
machine needs, and links that lead somewhere."""

import re

import pytest

from tests.support.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
SECTIONS = ["Quickstart", "Install", "Your own cluster", "The variables", "Results", "Pointers"]
SCREEN = 30  # lines: what a terminal or the top of the rendered page shows


def commands(text: str) -> list[str]:
    """The commands of the ```sh blocks, comments and blank lines left out."""
    lines = [line.split("#", 1)[0].strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S)
             for line in block.splitlines()]
    return [line for line in lines if line]


def anchor(heading: str) -> str:
    """The id a Markdown renderer (GitHub's) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_one_page_in_the_users_order():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == SECTIONS, headings
    intro = text.split("\n## ", 1)[0]
    assert len(intro.split("\n\n")) >= 2, "the page opens with what the project is"


def test_the_first_screen_gives_a_fresh_machine_two_commands():
    """What it is and the quickstart fit one screen, and the quickstart is two commands: the demo, the tests."""
    first = README.read_text().split("\n## Install\n", 1)[0]
    assert len(first.splitlines()) <= SCREEN
    assert commands(first) == ["make demo", "make test"]


@pytest.mark.parametrize("doc", ["README.md", "docs/your-cluster.md"])
def test_every_link_leads_somewhere(doc):
    path = REPO_ROOT / doc
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{doc}: {target} does not exist"
        if fragment:
            ids = {anchor(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), re.M)}
            assert fragment in ids, f"{doc}: {target}: no such heading in {linked.name}"
