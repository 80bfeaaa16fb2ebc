"""The generator's modules import each other without a cycle, counting imports inside functions too
(a lazy import that only breaks a cycle at run time is still a cycle in the design)."""

from __future__ import annotations

import ast

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "generator"


def imports_of(path) -> set[str]:
    """The generator modules `path` imports (relative or absolute, at any depth of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base.startswith("generator"):
                base = base.removeprefix("generator").lstrip(".")
                if base:
                    found.add(base.split(".")[0])
                else:  # from . import a, b
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("generator."))
    return found


def test_no_import_cycle():
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    graph = {name: imports_of(path) & set(modules) - {name} for name, path in modules.items()}
    done, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        path.append(name)
        for other in sorted(graph[name]):
            visit(other)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
