"""docs/jobs.md's Role grants every request the code makes in a namespace: the objects each target
renders (applied, dry-run, cleaned up), and each kubectl call of scripts/run.sh, scripts/clean.sh,
jaxgen check and jaxgen status/list/logs (and their cause line), found in the code by its words; a
kubectl subcommand the table below does not know fails the test until it is added, and a rule taken
out of the Role fails it."""

from __future__ import annotations

import re

import pytest
import yaml

from generator.engines.kubernetes import render_documents
from generator.targets import KUBERNETES
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT

DOC = REPO_ROOT / "docs" / "jobs.md"
RUN, CLEAN = REPO_ROOT / "scripts" / "run.sh", REPO_ROOT / "scripts" / "clean.sh"
ENGINE = REPO_ROOT / "generator" / "engines" / "kubernetes"
JOBS, PREFLIGHT, CAUSES = ENGINE / "jobs.py", ENGINE / "preflight.py", ENGINE / "causes.py"

APPLY = ("get", "create", "patch")  # kubectl apply --server-side: a PATCH, and create where the object is new
CLEANED = ("list", "delete")  # clean.sh: kubectl get -l, kubectl delete -l
WORKLOADS = [("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("kubeflow.org", "jaxjobs"),
             ("trainer.kubeflow.org", "trainjobs")]
# (file, the call's words in it, group, resource, verbs): each is found in the code, and granted.
CALLS = [
    (RUN, r'kube get "\$kind" "\$NAME"', None, "workloads", ("get",)),
    (RUN, r'get "\$kind" "\$NAME" --watch', None, "workloads", ("list", "watch")),
    (RUN, r"kube get pods -l", "", "pods", ("list",)),
    (RUN, r'logs (-f )?"pod/', "", "pods/log", ("get",)),
    (RUN, r'kube delete pod "\$pod"', "", "pods", ("delete",)),
    (RUN, r'kube apply -f "\$manifest"', "", "pods", ("get", "create", "patch")),
    (RUN, r'kube wait --for=condition=Ready "pod/', "", "pods", ("get", "list", "watch")),
    (RUN, r'kube exec "\$pod"', "", "pods/exec", ("create",)),
    (RUN, r"kube get events", "", "events", ("list",)),
    (RUN, r"kube apply --server-side", None, "rendered", APPLY),
    (CLEAN, r"kube get persistentvolumeclaims -l", "", "persistentvolumeclaims", ("list",)),
    (CLEAN, r'kube (get|delete) "\$(kinds_csv|k)" -l', None, "rendered", CLEANED),
    (CLEAN, r"kube wait --for=delete pods -l", "", "pods", ("list", "watch")),
    (PREFLIGHT, r'"create", "--dry-run=server"', None, "rendered", ("create",)),
    (PREFLIGHT, r'"create", "--dry-run=server"', "", "pods", ("create",)),  # the pods' dry run
    (PREFLIGHT, r'kube\.get\("localqueues\.kueue\.x-k8s\.io"', "kueue.x-k8s.io", "localqueues", ("get",)),
    (PREFLIGHT, r'kube\.get\("persistentvolumeclaim"', "", "persistentvolumeclaims", ("get",)),
    (PREFLIGHT, r'kube\.get\("secret"', "", "secrets", ("get",)),
    (JOBS, r'kube\.get\(",".join\(resources\)', None, "workloads", ("list",)),
    (JOBS, r"kube\.pods\b", "", "pods", ("list",)),
    (JOBS, r"kube\.items\(WORKLOADS\)", "kueue.x-k8s.io", "workloads", ("list",)),
    (JOBS, r"/proxy\{METRICS_PATH\}", "", "pods/proxy", ("get",)),
    (JOBS, r'"logs", f"pod/', "", "pods/log", ("get",)),
    (CAUSES, r"/namespaces/\{self\.kube\.namespace\}/events", "", "events", ("list",)),
    (CAUSES, r'kube\.get\("persistentvolumeclaim"', "", "persistentvolumeclaims", ("get",)),
    (CAUSES, r'kube\.get\("localqueues\.kueue\.x-k8s\.io"', "kueue.x-k8s.io", "localqueues", ("get",)),
]
# Every kubectl subcommand the scripts run in the namespace; those outside it need no Role.
SHELL_SUBCOMMANDS = {"get", "apply", "delete", "wait", "exec", "logs"}
OUTSIDE = {"api-resources", "config"}  # discovery and the local kubeconfig: no namespace's Role
KUBE_CALL = re.compile(r'\bkube(?:ctl "\$\{kube_args\[@\]\}"(?: --namespace "\$NAMESPACE")?)? ([a-z-]+)')


def plural(kind: str) -> str:
    kind = kind.lower()
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


def rendered() -> set[tuple[str, str]]:
    """(group, resource) of every object a Kubernetes target renders, every optional object on."""
    found = set()
    for target in KUBERNETES:
        sets = ["persistence.enabled=true", "metrics.pod_monitor=true"]
        sets += ["trainjob.own_runtime=true"] if target == "trainjob" else ["image.source=stock"]  # its ConfigMap
        for doc in render_documents(load_values([str(EXAMPLES_DIR / "seed.json")], sets, target)):
            found.add((doc["apiVersion"].rpartition("/")[0], plural(doc["kind"])))
    return found


def required() -> set[tuple[str, str, str]]:
    objects = rendered()
    needed = set()
    for path, words, group, resource, verbs in CALLS:
        assert re.search(words, path.read_text()), f"{path.name} no longer has {words}: update CALLS"
        targets = (objects if resource == "rendered" else WORKLOADS if resource == "workloads"
                   else [(group, resource)])
        needed |= {(g, r, verb) for g, r in targets for verb in verbs}
    return needed


def role(text: str) -> dict:
    [found] = [doc for block in re.findall(r"```yaml\n(.*?)```", text, re.S)
               for doc in yaml.safe_load_all(block) if doc and doc.get("kind") == "Role"]
    return found


def granted(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def uncovered(rules: list[dict]) -> set[tuple[str, str, str]]:
    return required() - granted(rules)


def test_the_role_grants_every_request_of_the_code():
    assert uncovered(role(DOC.read_text())["rules"]) == set()


def test_the_rendered_objects_include_each_targets_own():
    objects = rendered()
    assert set(WORKLOADS) | {("", "services"), ("networking.k8s.io", "networkpolicies"),
                             ("", "persistentvolumeclaims"), ("trainer.kubeflow.org", "trainingruntimes"),
                             ("monitoring.coreos.com", "podmonitors")} <= objects, objects


def test_every_kubectl_subcommand_of_the_scripts_is_known():
    for path in (RUN, CLEAN):
        code = re.sub(r"(^|\s)#.*$", "", path.read_text(), flags=re.M)  # not the comments
        found = set(KUBE_CALL.findall(code))
        assert found - OUTSIDE <= SHELL_SUBCOMMANDS, (path.name, found - OUTSIDE - SHELL_SUBCOMMANDS)
    for subcommand in SHELL_SUBCOMMANDS:
        shell = [words for path, words, *_ in CALLS if path in (RUN, CLEAN)]
        assert any(re.search(rf"\b{subcommand}\b", words) for words in shell), subcommand


@pytest.mark.parametrize("index", range(len(role(DOC.read_text())["rules"])))
def test_a_rule_taken_out_of_the_role_fails_the_check(index):
    """The check is real: each rule of the Role is needed by some call (none is decoration)."""
    rules = role(DOC.read_text())["rules"]
    assert uncovered(rules[:index] + rules[index + 1:]), rules[index]


def test_a_resource_missing_from_a_rule_fails_the_check():
    rules = [dict(rule, resources=[r for r in rule["resources"] if r != "networkpolicies"])
             for rule in role(DOC.read_text())["rules"]]
    assert uncovered(rules) == {("networking.k8s.io", "networkpolicies", verb) for verb in APPLY + CLEANED}
