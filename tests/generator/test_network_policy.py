"""The job's NetworkPolicy: it selects exactly the pods of the job on every target, admits the job's
own pods on every port, the helm test pod on the coordinator port and metrics_from on the metrics
port, leaves egress open unless it is given rules, and a typo in a passed-through peer is refused."""

import json

import pytest

from generator.targets import KUBERNETES
from tests.support.jaxgen import jaxgen
from tests.support.manifests import KUBERNETES_VERSIONS, pod_templates, validation_problems

RENDERS = [(target, ()) for target in KUBERNETES] + [("trainjob", ("trainjob.own_runtime=true",))]


def render(*args: str) -> list[dict]:
    result = jaxgen("render", *args)
    assert result.exit_code == 0, result.stderr
    return result.documents()


def policy_of(docs: list[dict]) -> dict:
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    return policy


def selects(selector: dict, labels: dict) -> bool:
    return selector.keys() == {"matchLabels"} and selector["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("target,sets", RENDERS)
def test_the_policy_selects_every_pod_of_the_job_and_admits_them_to_each_other(target, sets):
    docs = render("--target", target, "--set", "name=np", *[a for s in sets for a in ("--set", s)])
    policy = policy_of(docs)
    templates = [t for t in pod_templates(docs) if "containers" in t["spec"]]  # not an own runtime's JobSet template
    assert templates
    selector = policy["spec"]["podSelector"]
    assert all(selects(selector, t["metadata"]["labels"]) for t in templates)
    assert selector["matchLabels"]["app.kubernetes.io/instance"] == "np"  # no other release's pods
    own, test, metrics = policy["spec"]["ingress"]
    assert own == {"from": [{"podSelector": selector}]}  # every port: gloo and NCCL pick ephemeral ones
    assert test["ports"] == [{"port": 1234, "protocol": "TCP"}]
    assert test["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "test"
    assert metrics == {"from": [{"namespaceSelector": {}}], "ports": [{"port": 8000, "protocol": "TCP"}]}
    assert policy["spec"]["policyTypes"] == ["Ingress"] and "egress" not in policy["spec"]
    for version in KUBERNETES_VERSIONS:
        assert validation_problems(policy, version) == []


def test_metrics_from_and_egress_rules():
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    egress = [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 443, "protocol": "TCP"}]}]
    policy = policy_of(render("--set-json", f"network_policy.metrics_from={json.dumps(monitoring)}",
                              "--set-json", f"network_policy.egress={json.dumps(egress)}",
                              "--set", "metrics.port=9100"))
    spec = policy["spec"]
    assert spec["ingress"][2] == {"from": monitoring, "ports": [{"port": 9100, "protocol": "TCP"}]}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    own_pods, dns, *rest = spec["egress"]
    assert own_pods == {"to": [{"podSelector": spec["podSelector"]}]}
    assert dns == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    assert rest == egress
    for version in KUBERNETES_VERSIONS:
        assert validation_problems(policy, version) == []
    closed = policy_of(render("--set-json", "network_policy.egress=[]", "--set-json", "network_policy.metrics_from=[]"))
    assert len(closed["spec"]["ingress"]) == 2 and len(closed["spec"]["egress"]) == 2  # own pods and DNS only
    no_metrics = policy_of(render("--set", "metrics.port=0"))
    assert len(no_metrics["spec"]["ingress"]) == 2


def test_off_renders_none():
    assert all(d["kind"] != "NetworkPolicy" for d in render("--set", "network_policy.enabled=false"))
    assert all(d["kind"] != "NetworkPolicy" for d in render("--set", "network_policy.enabled=false", "--target", "jobset"))


@pytest.mark.parametrize("key,value,path", [
    ("network_policy.metrics_from", [{"namespaceSelecter": {}}], "$.network_policy.metrics_from[0]"),
    ("network_policy.egress", [{"ports": [{"port": 53, "protocol": "ICMP"}]}], "$.network_policy.egress[0]"),
    ("network_policy.egress", {"to": []}, "$.network_policy.egress"),
])
def test_a_bad_peer_or_rule_is_refused_with_its_path(key, value, path):
    result = jaxgen("render", "--set-json", f"{key}={json.dumps(value)}")
    assert result.exit_code == 2 and result.stdout == ""
    assert any(line.strip().startswith(f"{path}") for line in result.stderr.splitlines()), result.stderr
