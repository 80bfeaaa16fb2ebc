"""The target table (generator/targets.py) is what the renders, the scripts and the chart do."""

from __future__ import annotations

import re

import pytest

from generator.checks import schema
from generator.render import render_documents
from generator.targets import KUBERNETES, LOCAL, NAMES, TARGETS, cleanup_resources, restart_budget
from generator.values import load_values
from tests.support.paths import REPO_ROOT
from trainer.contract import DNS_LABEL_MAX


def _render(name: str, *sets: str) -> tuple[dict, list[dict]]:
    values = load_values([], ["name=tt", f"target={name}", *sets])
    return values, render_documents(values)


def test_the_schema_enum_is_the_table():
    assert schema()["properties"]["target"]["enum"] == list(NAMES)


@pytest.mark.parametrize("name", KUBERNETES)
def test_the_job_object_is_the_rows_kind(name):
    _, docs = _render(name)
    (job,) = [d for d in docs if d["kind"] == TARGETS[name].kind]
    assert job["metadata"]["name"] == "tt"
    assert TARGETS[name].resource.split(".")[0] == TARGETS[name].kind.lower() + "s"


@pytest.mark.parametrize("name", LOCAL)
def test_the_pod_spec_sits_where_the_row_says(name):
    _, docs = _render(name)
    node = next(d for d in docs if d["kind"] == TARGETS[name].kind)
    for key in TARGETS[name].pod_spec_path:
        node = node[key]
    assert node["containers"][0]["name"] == "jax"


@pytest.mark.parametrize("name", KUBERNETES)
def test_jax_variables_come_from_us_or_from_the_engine(name):
    values, docs = _render(name)
    text = str(docs)
    t = TARGETS[name]
    if t.process_env:
        assert f"'{t.coordinator_host('tt')}:{values['coordinator_port']}'" in text
    else:
        assert "JAX_COORDINATOR_ADDRESS" not in text


def test_a_trainjob_patches_the_runtimes_job_and_container():
    _, (trainjob,) = _render("trainjob")
    (patch,) = trainjob["spec"]["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == TARGETS["trainjob"].runtime_job
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == TARGETS["trainjob"].runtime_container
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_restart_budget_reads_the_rows_variable():
    assert restart_budget(load_values([], ["target=jobset", "jobset.max_restarts=7"])) == 7
    assert restart_budget(load_values([], ["target=indexed-job", "backoff_limit=5"])) == 5


def test_the_scripts_read_every_fact_and_clean_every_kind():
    release_sh = (REPO_ROOT / "scripts" / "lib" / "release.sh").read_text()
    reset = re.search(r'^\s*KIND="".*$', release_sh, re.M).group(0)
    assert set(re.findall(r'(\w+)=""', reset)) == set(TARGETS["jobset"].facts("x"))
    assert set(cleanup_resources()) >= {TARGETS[n].resource for n in KUBERNETES}


@pytest.mark.parametrize("name", [n for n in KUBERNETES if TARGETS[n].pod_name_suffix])
def test_names_fit_the_jobset_webhooks_pod_name_limit(name):
    """The JobSet webhook refuses a JobSet whose pod names (<hostname>-<5 random characters>) pass 63
    characters; a TrainJob is then admitted but never runs. jaxgen refuses such a name itself."""
    t = TARGETS[name]
    longest = DNS_LABEL_MAX - len(t.pod_hostname("", 1) + t.pod_name_suffix)  # 2 hosts: the last index is 1
    load_values([], [f"target={name}", f"name={'n' * longest}"])
    from generator.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as refused:
        load_values([], [f"target={name}", f"name={'n' * (longest + 1)}"])
    assert any(e.startswith("$.name: pod name ") and "would be 64 characters" in e for e in refused.value.errors)
