"""Each engine takes its own options (its Options dataclass) and is chosen by lookup: the shared
interface (generator/engines/base.py) names no engine's parameters, and no module picks an engine by
writing its name. Each claim is also shown to fail on a planted violation."""

from __future__ import annotations

import ast
import inspect
from typing import Protocol

from generator import engines
from generator.engines.base import Engine
from tests.support.paths import REPO_ROOT

KUBERNETES_PARAMETERS = {"kubeconfig", "context", "namespace"}


def engine_specific_parameters(interface: type) -> list[str]:
    """The interface's methods that take a Kubernetes parameter."""
    return sorted(name for name, member in vars(interface).items() if callable(member)
                  and KUBERNETES_PARAMETERS & set(inspect.signature(member).parameters))


def named_picks(source: str) -> list[str]:
    """Each name written into an ENGINES[...] of a module: an engine picked by its name, not by lookup."""
    return [name.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Subscript)
            and getattr(node.value, "attr", getattr(node.value, "id", None)) == "ENGINES"
            for name in ast.walk(node.slice) if isinstance(name, ast.Constant) and isinstance(name.value, str)]


def test_the_shared_interface_takes_no_engines_parameters():
    assert engine_specific_parameters(Engine) == []

    class Planted(Protocol):
        def jobs_at(self, context: str | None, namespace: str | None): ...

    assert engine_specific_parameters(Planted) == ["jobs_at"]


def test_no_module_picks_an_engine_by_its_name():
    assert {str(p.relative_to(REPO_ROOT)): picks for p in (REPO_ROOT / "generator").rglob("*.py")
            if (picks := named_picks(p.read_text()))} == {}
    assert named_picks('engines.ENGINES["slurm" if slurm else "kubernetes"]') == ["slurm", "kubernetes"]
    assert named_picks("engines.ENGINES[targets.target(values).engine]") == []


def test_the_flag_or_the_table_chooses_and_each_engine_keeps_its_own_options():
    kubernetes, slurm = engines.ENGINES["kubernetes"], engines.ENGINES["slurm"]
    assert engines.selected() is kubernetes and engines.selected(slurm=False) is kubernetes
    assert engines.selected(slurm=True) is slurm
    given = {"kubeconfig": "/k", "context": "c", "namespace": "n"}
    assert engines.options(kubernetes, **given) == kubernetes.Options("/k", "c", "n")
    assert engines.options(slurm, **given) == slurm.Options()
