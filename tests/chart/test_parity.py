"""`helm template <name> charts/jax-training -f F` renders the same documents as `jaxgen render F`.

Compared as parsed data; the only differences allowed are the ones the chart's README documents:
app.kubernetes.io/managed-by (Helm vs jaxgen) and Helm's helm.sh/chart label on top-level objects.
"""

from __future__ import annotations

import difflib
import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.targets import KUBERNETES, workload
from tests.support.examples import EXAMPLES, KUBERNETES_EXAMPLES, target_of
from tests.support.manifests import default_kinds
from tests.support.strategies import variables

from .cases import CASES
from .helm import CHART_DIR, assert_refuses_target, comparable, helm_template, jaxgen_documents, release_name, write_values
from .strategies import chart_variables


def assert_parity(values_file, release: str) -> list[dict]:
    expected = comparable(jaxgen_documents(values_file), "jaxgen")
    result = helm_template(release_name(release), values_file)
    assert result.returncode == 0, result.stderr
    actual = comparable(result.documents(), "helm")
    assert [d["kind"] for d in actual] == [d["kind"] for d in expected]
    for got, want in zip(actual, expected):
        assert got == want, f"{want['kind']} differs (- jaxgen, + helm):\n{_diff(want, got)}"
    return actual


def _diff(want: dict, got: dict) -> str:
    def lines(doc):
        return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(lines(want), lines(got), "jaxgen", "helm", lineterm="", n=2))


def test_examples_exist():
    assert len(EXAMPLES) >= 5
    assert KUBERNETES_EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example(path):
    values = json.loads(path.read_text())
    name = values.get("name", "jax-training")
    if path not in KUBERNETES_EXAMPLES:
        # jaxgen renders it without Kubernetes objects; the chart refuses with a clear message.
        assert_refuses_target(helm_template(name, path), target_of(path))
        return
    docs = assert_parity(path, name)
    service = workload(values.get("target", "indexed-job")).hosts.service
    own_names = {"PersistentVolumeClaim": f"{name}-outputs", "Service": service.format(name=name) if service else name}
    assert all(doc["metadata"]["name"] == own_names.get(doc["kind"], name) for doc in docs)


def test_matrix_is_large_and_covers_every_target():
    assert len(CASES) >= 30
    targets = {case.get("target") for case in CASES.values()}
    assert targets == set(KUBERNETES)
    assert {case.get("accelerator", "cpu") for case in CASES.values()} == {"cpu", "gpu"}
    assert {case.get("hosts_count", 2) == 1 for case in CASES.values()} == {True, False}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matrix(case, tmp_path):
    values = CASES[case]
    path = write_values(tmp_path, case, values)
    docs = assert_parity(path, values["name"])
    kinds = sorted(d["kind"] for d in docs)
    own_runtime = ["trainjob.own_runtime=true"] if values.get("trainjob", {}).get("own_runtime") else []
    extra = ["PersistentVolumeClaim"] if values.get("persistence", {}).get("enabled") else []
    extra += ["PodMonitor"] if values.get("metrics", {}).get("pod_monitor") else []
    expected = extra + list(default_kinds(values["target"], *own_runtime))
    if not values.get("network_policy", {}).get("enabled", True):
        expected.remove("NetworkPolicy")
    assert kinds == sorted(expected)


def test_yaml_values_file(tmp_path):
    """A YAML values file (anchors, comments, a multi-line string) reads the same in both engines."""
    path = tmp_path / "values.yaml"
    path.write_text(
        "# comment\n"
        "name: yaml-case\n"
        "labels: &shared {team: ml}\n"
        "annotations:\n"
        "  note: |\n"
        "    two\n"
        "    lines\n"
        "node_selector: *shared\n"
        "training: {learning_rate: 1e-5, momentum: .5, epochs: 2}\n")
    assert_parity(path, "yaml-case")


def test_several_values_files_merge_alike(tmp_path):
    """-f A -f B: maps merge key by key, lists are replaced, in both engines."""
    first = write_values(tmp_path, "a", {"name": "merged", "labels": {"a": "1"}, "env": [{"name": "A", "value": "1"}],
                                         "resources": {"limits": {"cpu": "2"}}})
    second = write_values(tmp_path, "b", {"labels": {"b": "2"}, "env": [{"name": "B", "value": "2"}],
                                          "training": {"epochs": 7}})
    expected = comparable(jaxgen_documents(first, second), "jaxgen")
    result = helm_template("merged", first, second)
    assert result.returncode == 0, result.stderr
    assert comparable(result.documents(), "helm") == expected



@pytest.mark.parametrize("files", [
    # A null in one file and a mapping in a later one: Helm merges the files first, so the mapping
    # merges over the defaults (the default requests stay).
    ({"resources": None}, {"resources": {"limits": {"cpu": "3"}}}),
    ({"resources": {"requests": None}}, {"resources": {"requests": {"cpu": "1"}}}),
    ({"resources": {"limits": {"cpu": "3"}}}, {"resources": {"requests": None}}),
    ({"node_selector": {"a": "b"}}, {"node_selector": None}, {"node_selector": {"c": "d"}}),
], ids=["null-then-map", "nested-null-then-map", "map-then-null", "map-null-map"])
def test_nulls_between_values_files_merge_alike(tmp_path, files):
    paths = [write_values(tmp_path, f"f{i}", {"name": "nulls", **values}) for i, values in enumerate(files)]
    result = helm_template("nulls", *paths)
    assert result.returncode == 0, result.stderr
    assert comparable(result.documents(), "helm") == comparable(jaxgen_documents(*paths), "jaxgen")


def test_set_text_with_a_hash_and_whole_floats(tmp_path):
    """--set keeps " #..." (Helm's strvals has no comments); a whole number written 2.0 is 2 in both."""
    from generator.engines.kubernetes import render_documents
    from generator.values import load_values

    from .helm import helm

    path = write_values(tmp_path, "floats", {"name": "floats", "training": {"epochs": 2.0, "learning_rate": 1.0}})
    sets = ["annotations.note=a #b", "annotations.n=#x"]
    result = helm("template", "floats", str(CHART_DIR), "-f", str(path), *[a for s in sets for a in ("--set", s)],
                  "--skip-tests")
    assert result.returncode == 0, result.stderr
    expected = render_documents(load_values([str(path)], sets))
    assert comparable(result.documents(), "helm") == comparable(expected, "jaxgen")
    annotations = expected[1]["metadata"]["annotations"]
    assert (annotations["note"], annotations["n"]) == ("a #b", "#x")


# ≥ 100 generated values files: the shared strategy of valid variables, plus chart-specific stress
# (numbers spelled as Helm cannot tell apart, text that would break naive templating).
@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(st.one_of(variables(), chart_variables()))
def test_generated(tmp_path_factory, values):
    path = write_values(tmp_path_factory.mktemp("gen"), "values", values)
    assert_parity(path, values["name"])


@pytest.mark.parametrize("path", KUBERNETES_EXAMPLES, ids=lambda p: p.name)
def test_helm_install_manifest(path):
    """What `helm install` would apply (a client-side dry run) is what jaxgen renders; the test hook
    is kept apart as a hook, not applied."""
    from .helm import helm

    name = json.loads(path.read_text()).get("name", "jax-training")
    result = helm("install", release_name(name), str(CHART_DIR), "-f", str(path), "--dry-run=client", "-o", "json")
    assert result.returncode == 0, result.stderr
    release = json.loads(result.stdout)
    applied = [doc for doc in yaml.safe_load_all(release["manifest"]) if doc]
    assert comparable(applied, "helm") == comparable(jaxgen_documents(path), "jaxgen")
    assert [hook["name"] for hook in release["hooks"]] == [f"{name}-test-coordinator"]


def test_set_overrides(tmp_path):
    """--set (strings, integers, booleans) and --set-json (numbers with a fraction) reach the same
    values in jaxgen as in Helm."""
    from generator.engines.kubernetes import render_documents
    from generator.values import load_values

    from .helm import helm

    sets = ["name=from-set", "hosts_count=4", "training.batch_size=64", "data.download=false",
            "data.volume.hostPath.path=/srv/mnist", "queue_name=q"]
    result = helm("template", "from-set", str(CHART_DIR), *[a for s in sets for a in ("--set", s)],
                  "--set-json", "training.learning_rate=0.5", "--skip-tests")
    assert result.returncode == 0, result.stderr
    expected = render_documents(load_values([], sets, set_jsons=["training.learning_rate=0.5"]))
    assert comparable(result.documents(), "helm") == comparable(expected, "jaxgen")


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("namespace_value", ["", "team-a"])
def test_namespace_is_the_release_namespace_unless_set(target, namespace_value, tmp_path):
    """Helm's convention in both renderers: an empty namespace is the release's (helm -n, jaxgen -n)."""
    from generator.engines.kubernetes import render_documents
    from generator.values import load_values

    from .helm import helm

    path = write_values(tmp_path, "ns", {"name": "ns", "target": target, "namespace": namespace_value})
    result = helm("template", "ns", str(CHART_DIR), "-f", str(path), "--namespace", "release-ns")
    assert result.returncode == 0, result.stderr
    expected = render_documents(load_values([str(path)], namespace="release-ns"))
    want = namespace_value or "release-ns"
    assert {d["metadata"].get("namespace") for d in expected} == {want}
    helm_docs = result.documents()
    assert {d["metadata"].get("namespace") for d in helm_docs} == {want}
    assert comparable([d for d in helm_docs if not d["metadata"]["name"].endswith("-test-coordinator")], "helm") == \
        comparable(expected, "jaxgen")


@pytest.mark.parametrize("version", ["1.31.0", "1.34.9", "1.35.0", "v1.36.3-gke.1"])
def test_the_kubernetes_version_selects_the_same_fields_in_both(tmp_path, version):
    """kube_version in jaxgen, and in helm either the value or --kube-version (what helm install
    reads from the cluster): container restart rules only from the version that has them."""
    values = write_values(tmp_path, "kube", {"name": "kube", "kube_version": version})
    expected = assert_parity(values, "kube")
    by_flag = helm_template(release_name("kube"), write_values(tmp_path, "plain", {"name": "kube"}),
                            extra=("--skip-tests", "--kube-version", version))
    assert by_flag.returncode == 0, by_flag.stderr
    assert comparable(by_flag.documents(), "helm") == expected
    [job] = [d for d in expected if d["kind"] == "Job"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert ("restartPolicyRules" in container) == (version not in ("1.31.0", "1.34.9"))
    # a process restarted in place learns its pod's UID there, and only there (trainer/rejoin.py)
    assert ("JAX_TRAINING_POD_UID" in [e["name"] for e in container["env"]]) == ("restartPolicyRules" in container)
