"""The target table (generator/targets.py) is what the renders, the scripts and the chart do."""

from __future__ import annotations

import json
import re

import pytest

from generator import engines
from generator.checks import schema
from generator.engines.kubernetes import render_documents
from generator.errors import ValidationFailed
from generator.targets import ENGINES, KUBERNETES, LOCAL, NAMES, TARGETS, cleanup_resources, restart_budget
from generator.values import load_values
from tests.support.paths import REPO_ROOT
from generator.engines.kubernetes.policy import DNS_LABEL_MAX
from trainer.contract import PROCESS_ENV


def _render(name: str, *sets: str) -> tuple[dict, list[dict]]:
    values = load_values([], ["name=tt", f"target={name}", *sets])
    return values, render_documents(values)


def test_the_schema_enum_is_the_table():
    """Written from the table by make generate: the hand-written schema does not list the targets."""
    assert schema()["properties"]["target"]["enum"] == list(NAMES)
    hand = json.loads((REPO_ROOT / "variables" / "schema.json").read_text())
    assert "enum" not in hand["properties"]["target"]


def test_every_engine_of_the_table_has_its_renderer_and_every_template_its_file():
    assert set(engines.ENGINES) == set(ENGINES)
    for t in TARGETS.values():
        renderer = engines.ENGINES[t.engine]
        assert renderer.__name__ == f"generator.engines.{t.engine}"
        assert (REPO_ROOT / "generator" / "engines" / t.engine / "templates" / t.template).is_file(), t.name
        assert t.kubernetes == (t.engine == "kubernetes"), f"{t.name}: a Kubernetes target has a workload, no other"


@pytest.mark.parametrize("name", KUBERNETES)
def test_the_job_object_is_the_rows_kind(name):
    _, docs = _render(name)
    w = TARGETS[name].workload
    (job,) = [d for d in docs if d["kind"] == w.kind]
    assert job["metadata"]["name"] == "tt"
    assert w.resource.split(".")[0] == w.kind.lower() + "s"


@pytest.mark.parametrize("name", LOCAL)
def test_the_pod_spec_sits_where_the_row_says(name):
    _, docs = _render(name)
    w = TARGETS[name].workload
    node = next(d for d in docs if d["kind"] == w.kind)
    for key in w.pod_spec_path:
        node = node[key]
    assert node["containers"][0]["name"] == w.container


@pytest.mark.parametrize("name", KUBERNETES)
def test_jax_variables_come_from_us_or_from_the_engine(name):
    values, docs = _render(name)
    text = str(docs)
    t = TARGETS[name]
    if t.process_env or t.workload.hosts.service:  # ours, or ours beside the engine's (its Service)
        assert f"'{t.workload.hosts.coordinator('tt')}:{values['coordinator_port']}'" in text
        assert text.count("'JAX_COORDINATOR_ADDRESS'") == 1
    else:
        assert "JAX_COORDINATOR_ADDRESS" not in text
    assert ("'PYTHONUNBUFFERED'" in text) == ("PYTHONUNBUFFERED" not in t.workload.engine_env)


@pytest.mark.parametrize("name", KUBERNETES)
def test_what_the_engine_sets_is_reserved(name):
    """A user env entry must never override a variable the processes find their place from."""
    t = TARGETS[name]
    for launcher in (t.launcher, *t.engine_sets):
        assert set(launcher.env(0, 2, "h", 1)) <= set(PROCESS_ENV), launcher.name


@pytest.mark.parametrize("name", KUBERNETES)
def test_the_rows_naming_is_the_rendered_one(name):
    """Pod 0 of the render answers to the row's coordinator name: its subdomain's Service is the job's
    name, or the coordinator Service selects pod 0 alone (by the labels the engine gives it)."""
    _, docs = _render(name)
    w = TARGETS[name].workload
    hosts = w.hosts
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    if hosts.service:
        assert list(services) == [hosts.coordinator("tt")] == ["tt-coord"]
        assert services["tt-coord"]["spec"]["selector"] == w.process_labels("tt", 0)
        assert f"{w.index_label}=0" in w.rank0_selector("tt")
        # no longer than pod 0's hostname, so that the hostname's length check covers the Service's name
        assert len(hosts.service.format(name="")) <= len(hosts.host("", 0))
        return
    assert hosts.coordinator("tt") == hosts.host("tt", 0) + (".tt" if hosts.subdomain else "")
    assert all(s == "tt" for s in services) and (not services or hosts.subdomain)


def test_a_trainjob_patches_the_runtimes_job_and_container():
    _, (trainjob, _policy) = _render("trainjob")
    runtime = TARGETS["trainjob"].workload.runtime
    (patch,) = trainjob["spec"]["runtimePatches"]
    assert patch["manager"] == runtime.patch_manager
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == runtime.job
    assert TARGETS["trainjob"].workload.hosts.host("tt", 1).startswith(f"tt-{runtime.job}-")
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == runtime.container == TARGETS["trainjob"].workload.container
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_restart_budget_reads_the_rows_variable():
    assert restart_budget(load_values([], ["target=jobset", "jobset.max_restarts=7"])) == 7
    assert restart_budget(load_values([], ["target=indexed-job", "backoff_limit=5"])) == 5


def test_the_scripts_read_every_fact_and_clean_every_kind():
    release_sh = (REPO_ROOT / "scripts" / "lib" / "release.sh").read_text()
    reset = re.search(r'^\s*KIND="".*$', release_sh, re.M).group(0)
    for name in NAMES:
        assert set(re.findall(r'(\w+)=""', reset)) == set(TARGETS[name].facts("x"))
    runtimes = [TARGETS[n].workload.runtime for n in KUBERNETES if TARGETS[n].workload.runtime]
    assert set(cleanup_resources()) >= {TARGETS[n].workload.resource for n in KUBERNETES} | {
        r for runtime in runtimes for r in runtime.resources}


@pytest.mark.parametrize("name", [n for n in KUBERNETES if TARGETS[n].workload.hosts.pod_name_suffix])
def test_names_fit_the_jobset_webhooks_pod_name_limit(name):
    """The JobSet webhook refuses a JobSet whose pod names (<hostname>-<5 random characters>) pass 63
    characters; a TrainJob is then admitted but never runs. jaxgen refuses such a name itself."""
    hosts = TARGETS[name].workload.hosts
    longest = DNS_LABEL_MAX - len(hosts.host("", 1) + hosts.pod_name_suffix)  # 2 hosts: the last index is 1
    load_values([], [f"target={name}", f"name={'n' * longest}"])

    with pytest.raises(ValidationFailed) as refused:
        load_values([], [f"target={name}", f"name={'n' * (longest + 1)}"])
    assert any(e.startswith("$.name: pod name ") and "would be 64 characters" in e for e in refused.value.errors)
