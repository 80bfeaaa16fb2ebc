"""Without -n, the release's namespace is the kube context's, else default, alike in `helm template`,
`jaxgen render` and scripts/prepare.sh (which leaves it to jaxgen): jaxgen render wrote `default`
where the other two took the context's. The kubeconfig is read as client-go reads it ($KUBECONFIG's
files, else ~/.kube/config; the first file that sets a value wins)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.support.paths import CHART_DIR, EXAMPLES_DIR, REPO_ROOT, SCRIPTS_DIR, tool

SEED = str(EXAMPLES_DIR / "seed.json")  # its namespace is empty: the release's


def kubeconfig(path, current: str | None, contexts: dict[str, str | None]):
    """A kubeconfig whose contexts (name: namespace, None for none) all name one cluster."""
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://x:1"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": name, "context": {"cluster": "c", "user": "u",
                                                      **({"namespace": ns} if ns else {})}}
                           for name, ns in contexts.items()]}
    if current:
        config["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return str(path)


def namespaces(text: str) -> set:
    return {doc["metadata"].get("namespace") for doc in yaml.safe_load_all(text) if doc}


def rendered(tmp_path, env: dict, *args: str) -> dict[str, set]:
    """The objects' namespaces as helm template, jaxgen render and prepare.sh write them, in `env`."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "HELM_NAMESPACE")}, **env}
    helm = subprocess.run([tool("helm"), "template", "seed", str(CHART_DIR), "-f", SEED, "--skip-tests", *args],
                          capture_output=True, text=True, timeout=120, env=env)
    jaxgen = subprocess.run([sys.executable, "-m", "generator", "render", SEED, *args], capture_output=True, text=True,
                            timeout=120, env={**env, "PYTHONPATH": str(REPO_ROOT)})
    build = tmp_path / "build"
    prepare = subprocess.run(["bash", str(SCRIPTS_DIR / "prepare.sh"), SEED, "-o", str(build), *args],
                             capture_output=True, text=True, timeout=120, env=env)
    assert helm.returncode == jaxgen.returncode == prepare.returncode == 0, helm.stderr + jaxgen.stderr + prepare.stderr
    prepared = set().union(*(namespaces(p.read_text()) for p in build.glob("*.yaml")))
    return {"helm": namespaces(helm.stdout), "jaxgen": namespaces(jaxgen.stdout), "prepare.sh": prepared}


@pytest.mark.parametrize("files,want", [
    ([("team", {"team": "team-a"})], "team-a"),
    ([("team", {"team": "team-a", "other": "team-b"})], "team-a"),
    ([("plain", {"plain": None})], "default"),  # a context without a namespace
    ([("gone", {"team": "team-a"})], "default"),  # current-context names no context
    ([(None, {"team": "team-a"}), ("team", {"team": "team-b"})], "team-a"),  # the first file's context wins
    ([("plain", {"plain": None}), ("plain", {"plain": "team-b"})], "default"),
    ([], "default"),  # a file that is not there
], ids=["context", "two-contexts", "no-namespace", "no-such-context", "merged", "first-wins", "missing"])
def test_without_n_all_three_take_the_kube_contexts_namespace(tmp_path, files, want):
    paths = [kubeconfig(tmp_path / f"config-{i}", current, contexts) for i, (current, contexts) in enumerate(files)]
    found = rendered(tmp_path, {"KUBECONFIG": os.pathsep.join(paths) or str(tmp_path / "nonexistent")})
    assert found == {"helm": {want}, "jaxgen": {want}, "prepare.sh": {want}}


def test_the_home_kubeconfig_is_read_without_kubeconfig_and_n_wins(tmp_path):
    home = tmp_path / "home"
    kubeconfig(home / ".kube" / "config", "team", {"team": "team-a"})
    assert rendered(tmp_path, {"HOME": str(home)}) == {"helm": {"team-a"}, "jaxgen": {"team-a"}, "prepare.sh": {"team-a"}}
    assert rendered(tmp_path, {"HOME": str(home)}, "-n", "ops") == {"helm": {"ops"}, "jaxgen": {"ops"},
                                                                   "prepare.sh": {"ops"}}


def test_an_empty_n_is_the_kube_contexts_namespace_too(tmp_path):
    """helm template -n '' takes the context's namespace, as no -n does (prepare.sh refuses -n '')."""
    env = {**os.environ, "KUBECONFIG": kubeconfig(tmp_path / "config", "team", {"team": "team-a"})}
    helm = subprocess.run([tool("helm"), "template", "seed", str(CHART_DIR), "-f", SEED, "--skip-tests", "-n", ""],
                          capture_output=True, text=True, timeout=120, env=env)
    jaxgen = subprocess.run([sys.executable, "-m", "generator", "render", SEED, "-n", ""], capture_output=True,
                            text=True, timeout=120, env={**env, "PYTHONPATH": str(REPO_ROOT)})
    assert namespaces(helm.stdout) == namespaces(jaxgen.stdout) == {"team-a"}, helm.stderr + jaxgen.stderr


@pytest.mark.parametrize("text", ["contexts: 5\ncurrent-context: a\n", "contexts: [5, {name: a, context: 7}]\ncurrent-context: a\n",
                                  "- a\n", "current-context: [a]\n", ": :\n"])
def test_a_malformed_kubeconfig_is_no_kubeconfig(tmp_path, text):
    from generator.names import context_namespace

    (tmp_path / "config").write_text(text)
    assert context_namespace({"KUBECONFIG": str(tmp_path / "config")}) == "default"
