"""The generator's modules import each other without a cycle, counting imports inside functions too
(a lazy import that only breaks a cycle at run time is still a cycle in the design), and in layers:
each engine package under generator/engines/ imports no other engine, and the engine-neutral modules
below them import no engine."""

from __future__ import annotations

import ast

from generator import engines
from generator.targets import ENGINES
from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "generator"
ENGINES_PACKAGE = "engines"


def module_name(path) -> str:
    """The dotted name below generator/ (engines.kubernetes for its __init__.py)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def imports_of(name: str, path, modules: set[str]) -> set[str]:
    """The generator modules `path` imports (relative or absolute, at any depth of the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = _join(*parts[: len(parts) - (node.level - 1)], node.module or "")
            elif (node.module or "").split(".")[0] == "generator":
                base = node.module.removeprefix("generator").lstrip(".")
            else:
                continue
            submodules = {_join(base, alias.name) for alias in node.names} & modules  # from . import a, b
            found |= submodules or ({base} & modules)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("generator.") for a in node.names if a.name.startswith("generator.")}
    return found & modules - {name}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    paths.pop("", None)  # generator/__init__.py: the version only
    return {name: imports_of(name, path, set(paths)) for name, path in paths.items()}


def test_no_import_cycle():
    imports = graph()
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
