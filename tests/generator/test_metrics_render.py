"""The trainer's metrics endpoint in the Kubernetes renders: a named container port and the scrape
annotations on every target by default, nothing with metrics.port 0, and an opt-in PodMonitor that
selects the job's pods by labels they carry and scrapes a port they declare."""

import dataclasses

import pytest

from generator.targets import KUBERNETES
from tests.support.manifests import pod_templates, trainjob_pod_template
from trainer.config import TrainConfig
from generator.engines.kubernetes.policy import METRICS_PORT_NAME
from trainer.contract import METRICS_PATH

from tests.support.jaxgen import jaxgen

DEFAULT_PORT = next(f.default for f in dataclasses.fields(TrainConfig) if f.name == "metrics_port")
SCRAPE_KEYS = ("prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path")


def render(target: str, *sets: str) -> list[dict]:
    args = ["render", "--target", target]
    for item in sets:
        args += ["--set", item]
    result = jaxgen(*args)
    assert result.exit_code == 0, result.stderr
    return result.documents()


def worker(docs: list[dict]) -> tuple[dict, dict, list[dict]]:
    """The worker pod's metadata, its trainer container and the ports its pod declares (a TrainJob's
    runtime declares them where we render it; its patch cannot)."""
    by_kind = {d["kind"]: d for d in docs}
    if "TrainJob" in by_kind:
        template = trainjob_pod_template(by_kind["TrainJob"])
        runtime = by_kind.get("TrainingRuntime")
        ports = [] if runtime is None else [
            p for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
            for c in job["template"]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
        return template["metadata"], template["spec"]["containers"][0], ports
    (template,) = pod_templates(docs)
    (container,) = template["spec"]["containers"]
    return template["metadata"], container, container["ports"]


def flag_value(container: dict, flag: str) -> str:
    args = container["args"]
    return args[len(args) - 1 - args[::-1].index(flag) + 1]  # the last one wins in the trainer


@pytest.mark.parametrize("target", KUBERNETES)
def test_every_target_declares_and_annotates_the_endpoint_by_default(target):
    metadata, container, ports = worker(render(target))
    assert flag_value(container, "--metrics-port") == str(DEFAULT_PORT)
    assert {k: metadata["annotations"][k] for k in SCRAPE_KEYS} == {
        "prometheus.io/scrape": "true", "prometheus.io/port": str(DEFAULT_PORT), "prometheus.io/path": METRICS_PATH}
    named = [p for p in ports if p["name"] == METRICS_PORT_NAME]
    if target == "trainjob":  # a runtime patch's container has no ports; jax-distributed declares none
        assert named == []
    else:
        assert named == [{"name": METRICS_PORT_NAME, "containerPort": DEFAULT_PORT, "protocol": "TCP"}]


@pytest.mark.parametrize("target", KUBERNETES)
def test_port_zero_turns_it_all_off(target):
    sets = ["metrics.port=0"] + (["trainjob.own_runtime=true"] if target == "trainjob" else [])
    docs = render(target, *sets)
    metadata, container, ports = worker(docs)
    assert flag_value(container, "--metrics-port") == "0"
    assert not set(SCRAPE_KEYS) & set(metadata.get("annotations", {}))
    assert METRICS_PORT_NAME not in [p["name"] for p in ports]
    assert "PodMonitor" not in [d["kind"] for d in docs]


def test_the_annotations_variable_wins_over_the_scrape_annotations():
    result = jaxgen("render", "--set-json", 'annotations={"prometheus.io/scrape": "false"}')
    assert result.exit_code == 0, result.stderr
    metadata, _, _ = worker(result.documents())
    assert metadata["annotations"]["prometheus.io/scrape"] == "false"
    assert metadata["annotations"]["prometheus.io/path"] == METRICS_PATH


@pytest.mark.parametrize("target", KUBERNETES)
def test_the_pod_monitor_scrapes_a_port_the_selected_pods_declare(target):
    sets = ["metrics.pod_monitor=true", "metrics.port=9100", "namespace=ml"]
    docs = render(target, *sets, *(["trainjob.own_runtime=true"] if target == "trainjob" else []))
    (monitor,) = [d for d in docs if d["kind"] == "PodMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "ml"
    metadata, _, ports = worker(docs)
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector and selector.items() <= metadata["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert [p["containerPort"] for p in ports if p["name"] == endpoint["port"]] == [9100]
    assert endpoint["path"] == metadata["annotations"]["prometheus.io/path"]
    assert set(monitor["spec"]) == {"selector", "podMetricsEndpoints"}
