"""The generator's and the trainer's modules import each other without a cycle, counting imports
inside functions too (a lazy import that only breaks a cycle at run time is still a cycle in the
design), and the generator's in layers: each engine package under generator/engines/ imports no
other engine, and the engine-neutral modules below them import no engine."""

from __future__ import annotations

import ast

import pytest

from generator import engines
from generator.targets import ENGINES
from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "generator"
ENGINES_PACKAGE = "engines"


def module_name(path, package=PACKAGE) -> str:
    """The dotted name below the package (engines.kubernetes for its __init__.py)."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def imports_of(name: str, path, modules: set[str], top: str = "generator") -> set[str]:
    """The modules of package `top` that `path` imports (relative or absolute, at any depth of the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = _join(*parts[: len(parts) - (node.level - 1)], node.module or "")
            elif (node.module or "").split(".")[0] == top:
                base = node.module.removeprefix(top).lstrip(".")
            else:
                continue
            submodules = {_join(base, alias.name) for alias in node.names} & modules  # from . import a, b
            found |= submodules or ({base} & modules)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix(top + ".") for a in node.names if a.name.startswith(top + ".")}
    return found & modules - {name}


def graph(top: str = "generator") -> dict[str, set[str]]:
    package = REPO_ROOT / top
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    paths.pop("", None)  # the package's __init__.py: the version only
    return {name: imports_of(name, path, set(paths), top) for name, path in paths.items()}


@pytest.mark.parametrize("top", ["generator", "trainer"])
def test_no_import_cycle(top):
    imports = graph(top)
    assert len(imports) > 10, f"{top}: the graph is not being read"
    done, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        path.append(name)
        for other in sorted(imports[name]):
            visit(other)
        path.pop()
        done.add(name)

    for name in sorted(imports):
        visit(name)


def _engine(module: str) -> str | None:
    """The engine package a module belongs to (None outside them; "" for the dispatcher)."""
    parts = module.split(".")
    if parts[0] != ENGINES_PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else ""


def test_every_engine_of_the_table_is_a_package_of_its_own():
    assert set(ENGINES) == {e for e in map(_engine, graph()) if e} == set(engines.ENGINES)


def test_an_engine_imports_no_other_engine_and_not_the_dispatcher():
    imports = graph()
    for module, imported in imports.items():
        engine = _engine(module)
        if engine:
            strays = {m for m in imported if _engine(m) is not None and _engine(m) != engine}
            assert not strays, f"{module} imports {strays}"


def test_the_engines_helpers_import_no_engine():
    """What the engines build on (transitively) is engine-neutral: it never reaches back into an engine."""
    imports = graph()
    helpers, todo = set(), [m for m in imports if _engine(m)]
    while todo:
        for other in imports[todo.pop()]:
            if _engine(other) is None and other not in helpers:
                helpers.add(other)
                todo.append(other)
    assert helpers, "the engines build on no helper module: the graph is not being read"
    for helper in sorted(helpers):
        assert not {m for m in imports[helper] if _engine(m) is not None}, f"{helper} imports an engine"
