"""Where a job's outputs are is decided once, at render time, and read back from where it was recorded
(the job object's annotations, release.env, a local run's record), never parsed out of the rendered
argv; the bucket's `<uri>/<name>` is composed in one place, trainer.bucket.job_uri (the chart's twin is
held to it by the parity tests). Each claim is shown to fail on a planted violation."""

from __future__ import annotations

import copy
import re
import shlex

import pytest

from generator.engines.kubernetes import render_documents
from generator.engines.kubernetes.jobs import _Job
from generator.engines.kubernetes.local.collect import outputs_of, resumes_from
from generator.engines.kubernetes.local.plan import job_object, local_values, plan_job
from generator.engines.kubernetes.outputs import NOT_RECORDED
from generator.engines.kubernetes.policy import OUTPUTS_DIR_ANNOTATION, OUTPUTS_URI_ANNOTATION
from generator.output import release_record
from generator.targets import KUBERNETES, workload
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT
from trainer.bucket import job_uri

CPU_LOCAL = str(EXAMPLES_DIR / "cpu-local.json")
SLASHES = "s3://team-results//runs//"  # a prefix the trainer reads as "runs", its inner slashes kept


def render(target: str = "indexed-job", *sets: str) -> tuple[dict, list[dict]]:
    values = load_values([CPU_LOCAL], [f"target={target}", *sets])
    return values, render_documents(local_values(values))


def misleading_args(values: dict, obj: dict) -> None:
    """Plant argv that says the outputs are elsewhere in the job object: a reader that parses it finds
    them there."""
    node = obj
    for key in workload(values["target"]).pod_spec_path:
        node = node[key]
    containers = [c for c in node.get("containers") or [] if c["name"] == workload(values["target"]).container]
    for container in containers or [obj["spec"]["trainer"]]:  # a TrainJob's trainer args
        container["args"] = [*container["args"], "--checkpoint-dir", "/elsewhere", "--run-name", "decoy",
                             "--outputs-uri=s3://decoy-bucket"]


# --- jaxgen status: the job object's annotations, not its pods' args ---------------------------------

def status_results(values: dict, obj: dict) -> str:
    return _Job({**obj, "metadata": {**obj["metadata"], "uid": "u1"}}, [], []).results()


@pytest.mark.parametrize("target", KUBERNETES)
def test_status_reads_where_the_outputs_are_from_the_job_object_not_its_args(target):
    values, docs = render(target)
    obj = copy.deepcopy(job_object(docs, values["target"]))
    # the volume mounted there, from the pod spec (a TrainJob's is in its runtime: none before its pods)
    volume = "" if target == "trainjob" else " in process 0's pod (an emptyDir: lost with the pod)"
    assert status_results(values, obj) == f"/checkpoints/{values['name']}{volume}"
    misleading_args(values, obj)
    assert status_results(values, obj) == f"/checkpoints/{values['name']}{volume}"
    obj["metadata"]["annotations"][OUTPUTS_DIR_ANNOTATION] = "/checkpoints/moved"  # the record moves: so does status
    assert status_results(values, obj) == f"/checkpoints/moved{volume}"
    del obj["metadata"]["annotations"][OUTPUTS_DIR_ANNOTATION]  # a job rendered before the record: one line says so
    assert status_results(values, obj) == NOT_RECORDED


def test_status_names_the_bucket_copy_as_the_trainer_spells_it():
    values, docs = render("jobset", f"outputs.uri={SLASHES}")
    obj = job_object(docs, values["target"])
    where = job_uri(SLASHES, values["name"])
    assert where == f"s3://team-results/runs/{values['name']}"
    assert obj["metadata"]["annotations"][OUTPUTS_URI_ANNOTATION] == where
    assert status_results(values, obj) == f"{where} (jaxgen results {where} fetches it)"


# --- jaxgen run: the rendered job object's record, mapped onto the processes' folders ----------------

def test_a_local_run_finds_its_outputs_where_the_job_object_records_them(tmp_path):
    values, docs = render("indexed-job", "persistence.enabled=true", f"outputs.uri={SLASHES}")
    claim = tmp_path / "claims" / f"{values['name']}-outputs"
    job = plan_job(values, docs, tmp_path / "scratch", tmp_path / "claims")
    assert outputs_of(job) == claim / values["name"]
    assert resumes_from(job, outputs_of(job)) == f"{job_uri(SLASHES, values['name'])}/checkpoints"
    planted = copy.deepcopy(docs)
    misleading_args(values, job_object(planted, values["target"]))
    job_object(planted, values["target"])["metadata"]["annotations"][OUTPUTS_DIR_ANNOTATION] = "/checkpoints/moved"
    job = plan_job(values, planted, tmp_path / "scratch", tmp_path / "claims")
    assert outputs_of(job) == claim / "moved"  # the record, not the planted --checkpoint-dir or --run-name
    assert job.outputs_uri == job_uri(SLASHES, values["name"])  # nor the planted --outputs-uri


# --- release.env: the same record, for scripts/run.sh ------------------------------------------------

def test_release_env_records_the_outputs_as_the_job_object_does():
    values, docs = render("trainjob", f"outputs.uri={SLASHES}", "checkpoint.dir=/ckpt/")
    env = dict(line.split("=", 1) for line in release_record(values)["release/release.env"].splitlines())
    annotations = job_object(docs, values["target"])["metadata"]["annotations"]
    assert shlex.split(env["OUTPUTS_DIR"]) == [annotations[OUTPUTS_DIR_ANNOTATION]] == [f"/ckpt/{values['name']}"]
    assert shlex.split(env["OUTPUTS_URI"]) == [annotations[OUTPUTS_URI_ANNOTATION]]


# --- one composition of <uri>/<name> ------------------------------------------------------------------

# How `<uri>/<name>` reads when it is composed again: an f-string, a concatenation, a join, the shell's
# and a Go template's.
COMPOSED = [
    re.compile(r"\{[^{}\n]*uri[^{}\n]*\}/\{[^{}\n]*name[^{}\n]*\}", re.I),
    re.compile(r"uri[\w.()'\"\[\]]*\s*\+\s*['\"]/['\"]\s*\+\s*[\w.'\"\[\]]*name", re.I),
    re.compile(r"['\"]/['\"]\.join\([^)\n]*uri[^)\n]*name", re.I),
    re.compile(r"\$\{?\w*uri\w*\}?/\$\{?\w*name", re.I),
    re.compile(r"\}\}/\{\{-?\s*\$?\.?[\w.]*name\b", re.I),
]
SCANNED = ("generator/**/*.py", "trainer/**/*.py", "scripts/**/*.py", "scripts/**/*.sh",
           "charts/jax-training/templates/**/*")


def compositions(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in COMPOSED)]


def test_uri_slash_name_is_composed_in_one_place():
    found = {str(path.relative_to(REPO_ROOT)): hits for pattern in SCANNED for path in REPO_ROOT.glob(pattern)
             if path.is_file() and (hits := compositions(path.read_text(errors="replace")))}
    assert found == {}, "compose it with trainer.bucket.job_uri (generator/runstore/location.py)"


@pytest.mark.parametrize("planted", [
    """            where = f"{uri.rstrip('/')}/{run_name}" if run_name else uri""",  # jobs.py's, once
    """    return f"{uri}/{values['name']}" if uri else \"\"""",  # output.py's, once
    """Rank 0 also keeps them in {{ trimSuffix "/" . }}/{{ $name }}/ (outputs.uri)""",  # NOTES.txt's, once
    """    where = outputs_uri + "/" + values["name"]""",
    """    where = "/".join((uri, run_name))""",
    """  log "fetching $OUTPUTS_URI/$NAME\"""",
])
def test_the_scan_finds_a_planted_composition(planted):
    assert compositions(f"x = 1\n{planted}\ny = 2\n") == [planted.strip()]
