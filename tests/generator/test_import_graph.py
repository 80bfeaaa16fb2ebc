"""The generator's and the trainer's modules import each other without a cycle, counting imports
inside functions too (a lazy import that only breaks a cycle at run time is still a cycle in the
design), and the generator's in layers:
the commands and helpers reach an engine only through the dispatcher (generator/engines/__init__.py)
and the interface (generator/engines/base.py), never an engine's own modules; each engine package
imports no other engine; and the engine-neutral modules below them import no engine. Each rule is also
shown to fail on a violation planted in a copy of the package."""

from __future__ import annotations

import ast
import shutil

import pytest

from generator import engines
from generator.engines.base import Engine, Jobs
from generator.targets import ENGINES
from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "generator"
ENGINES_PACKAGE = "engines"
INTERFACE = "engines.base"  # what an engine is, to the commands: engine-neutral
FACTS = "engines.kubernetes.policy"  # the Kubernetes facts: importing nothing of generator/, readable by all


def module_name(path, package=PACKAGE) -> str:
    """The dotted name below generator/ (engines.kubernetes for its __init__.py)."""
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


def graph(package=PACKAGE) -> dict[str, set[str]]:
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    paths.pop("", None)  # the package's __init__.py: the version only
    top = package.name
    return {name: imports_of(name, path, set(paths), top) for name, path in paths.items()}


def cycle(imports: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    done, path = set(), []

    def visit(name):
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        path.append(name)
        for other in sorted(imports[name]):
            if found := visit(other):
                return found
        path.pop()
        done.add(name)
        return None

    return next((found for name in sorted(imports) if (found := visit(name))), None)


def _engine(module: str) -> str | None:
    """The engine package a module belongs to (None outside them and for the interface; "" for the
    dispatcher)."""
    parts = module.split(".")
    if parts[0] != ENGINES_PACKAGE or module == INTERFACE or module.startswith(INTERFACE + "."):
        return None
    return parts[1] if len(parts) > 1 else ""


def internals_reached(imports: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, engine module) for each import of an engine's own module from outside the engines:
    a command or helper may import only the dispatcher, the interface and the Kubernetes facts (FACTS,
    which imports nothing of generator/: facts_importing())."""
    return sorted((module, other) for module, imported in imports.items() if _engine(module) is None
                  for other in imported if _engine(other) and other != FACTS)


def facts_importing(imports: dict[str, set[str]]) -> list[str]:
    """What FACTS imports of generator/ (nothing: its writers are the engine's chart_files.py)."""
    return sorted(imports[FACTS])


def strays(imports: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, other) for each import of another engine, or of the dispatcher, from inside an engine."""
    return sorted((module, other) for module, imported in imports.items() if _engine(module)
                  for other in imported if _engine(other) is not None and _engine(other) != _engine(module))


@pytest.mark.parametrize("top", ["generator", "trainer"])
def test_no_import_cycle(top):
    imports = graph(REPO_ROOT / top)
    assert len(imports) > 10, f"{top}: the graph is not being read"
    found = cycle(imports)
    assert found is None, "import cycle: " + " -> ".join(found)


def test_no_command_or_helper_reaches_an_engines_own_modules():
    assert internals_reached(graph()) == []


def test_the_kubernetes_facts_import_nothing_of_the_generator():
    assert facts_importing(graph()) == []


def test_the_facts_completion_index_field_is_the_target_tables_index_label():
    from generator.engines.kubernetes.policy import COMPLETION_INDEX_FIELD
    from generator.targets import COMPLETION_INDEX_KEY

    assert COMPLETION_INDEX_FIELD == f"metadata.annotations['{COMPLETION_INDEX_KEY}']"


def test_every_engine_of_the_table_is_a_package_of_its_own():
    assert set(ENGINES) == {e for e in map(_engine, graph()) if e} == set(engines.ENGINES)


def test_every_engine_offers_the_whole_interface():
    """Each engine module has every function of engines.base.Engine, with its parameters."""
    import inspect

    for name, engine in engines.ENGINES.items():
        assert isinstance(engine, Engine), name
        for member in ("render_text", "files", "stream", "errors", "warnings", "release_files", "check", "jobs_at",
                       "run_local"):
            wanted = list(inspect.signature(getattr(Engine, member)).parameters)[1:]  # less self
            assert list(inspect.signature(getattr(engine, member)).parameters)[:len(wanted)] == wanted, (name, member)
    assert isinstance(engines.ENGINES["slurm"].jobs_at(engines.ENGINES["slurm"].Options()), Jobs)


def test_an_engine_imports_no_other_engine_and_not_the_dispatcher():
    assert strays(graph()) == []


def helpers_reaching_an_engine(imports: dict[str, set[str]]) -> list[str]:
    """What the engines build on (transitively) is engine-neutral: it never reaches back into an engine."""
    helpers, todo = set(), [m for m in imports if _engine(m)]
    while todo:
        for other in imports[todo.pop()]:
            if _engine(other) is None and other not in helpers:
                helpers.add(other)
                todo.append(other)
    assert helpers, "the engines build on no helper module: the graph is not being read"
    return sorted(h for h in helpers if any(_engine(m) is not None for m in imports[h]))


def test_the_engines_helpers_import_no_engine():
    assert helpers_reaching_an_engine(graph()) == []


PLANTED = {  # a file of the package, the line planted in it, and the rule that must then fail
    "command reaches an engine's module": ("job_commands.py", "from .engines.kubernetes.jobs import ClusterJobs",
                                           lambda g: internals_reached(g) == [("job_commands", "engines.kubernetes.jobs")]),
    "command reaches an engine package": ("cli.py", "from .engines import slurm",
                                          lambda g: internals_reached(g) == [("cli", "engines.slurm")]),
    "command reaches the chart writers": ("job_commands.py", "from .engines.kubernetes import chart_files",
                                          lambda g: internals_reached(g) == [("job_commands",
                                                                              "engines.kubernetes.chart_files")]),
    "the facts import the generator": ("engines/kubernetes/policy.py", "from ... import targets",
                                       lambda g: facts_importing(g) == ["targets"]),
    "cycle through a lazy import": ("targets.py", "def f():\n    from . import checks",
                                    lambda g: cycle(g) is not None),
    "engine imports another": ("engines/slurm/render.py", "from ..kubernetes import hosts",
                               lambda g: strays(g) == [("engines.slurm.render", "engines.kubernetes.hosts")]),
    "helper imports an engine": ("names.py", "from .engines.base import Engine\nfrom . import engines",
                                 lambda g: helpers_reaching_an_engine(g) == ["names"]),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_each_rule_fails_on_a_planted_violation(tmp_path, case):
    """The rules read the files as they are: a copy of the package with one bad import breaks the rule."""
    copy = tmp_path / "generator"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "templates", "data"))
    clean = graph(copy)
    assert not (internals_reached(clean) or cycle(clean) or strays(clean) or helpers_reaching_an_engine(clean)
                or facts_importing(clean))
    file, line, broken = PLANTED[case]
    with open(copy / file, "a") as f:
        f.write("\n" + line + "\n")
    assert broken(graph(copy)), case
