"""trainer/contract.py is the one home of the facts the trainer, both renderers and the scripts
share: the renders carry them, and no source file restates them."""

from __future__ import annotations

import re

import pytest

from generator.engines.kubernetes import render_documents
from generator.values import load_values
from tests.support.paths import REPO_ROOT
from trainer import contract, exit_codes

# Hand-written sources of the renderers and the scripts (the generated copies are checked by
# test_generated_files.py).
SOURCES = [*(REPO_ROOT / "generator").rglob("*.py"), *(REPO_ROOT / "generator").rglob("*.j2"),
           *(REPO_ROOT / "charts" / "jax-training" / "templates").rglob("*"),
           *(REPO_ROOT / "scripts").rglob("*.sh"), *(REPO_ROOT / "scripts").glob("*.py"),
           *(p for p in (REPO_ROOT / "trainer").rglob("*.py") if p.name != "contract.py")]
RESTATED = {
    "the completion-index field": re.escape(contract.COMPLETION_INDEX_FIELD),
    "the completion-index key": re.escape(f'"{contract.COMPLETION_INDEX_KEY}"'),
    "the annotations limit": rf"\b{contract.ANNOTATIONS_MAX_BYTES}\b|256 \* 1024",
    "the system directories": r'"/opt/venv",?\s*"/opt/jax-training"|"/",?\s*"/tmp"',
    "the GPU limit": rf"MAX_GPUS\w*\s*=|gt \$local {contract.MAX_GPUS_PER_HOST}\b",
    "the DNS limits": rf"\w+_MAX\s*=\s*({contract.DNS_LABEL_MAX}|{contract.DNS_SUBDOMAIN_MAX})\b|"
                      rf"gt \(len .*\) ({contract.DNS_LABEL_MAX}|{contract.DNS_SUBDOMAIN_MAX})\b",
    "the pods' uid": rf"(runAsUser|runAsGroup|fsGroup|chown)\W+(-R\W+)?{contract.RUN_AS_ID}\b",
    "the JobSet failure rule": r"FailJobSet",
    "the process env names": r'"JAX_COORDINATOR_ADDRESS",\s*"JAX_COORDINATOR_PORT"',
}


@pytest.mark.parametrize("fact", sorted(RESTATED))
def test_no_source_restates_a_contract_fact(fact):
    pattern = re.compile(RESTATED[fact])
    found = [f"{path.relative_to(REPO_ROOT)}:{n}" for path in SOURCES if path.is_file()
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, f"{fact} restated (read trainer/contract.py instead): {found}"


@pytest.mark.parametrize("target", ["indexed-job", "jobset"])
def test_the_renders_carry_the_contract(target):
    docs = render_documents(load_values([], [f"target={target}"]))
    job = next(d for d in docs if d["kind"] in ("Job", "JobSet"))
    rules = contract.POD_FAILURE_RULES
    if job["kind"] == "JobSet":
        assert job["spec"]["failurePolicy"]["rules"] == list(contract.JOBSET_FAILURE_RULES)
        job = job["spec"]["replicatedJobs"][0]["template"]
        rules = contract.CHILD_JOB_FAILURE_RULES
    policy = job["spec"]["podFailurePolicy"]["rules"]
    assert [rule["action"] for rule in policy] == [action for action, _ in rules]
    assert policy[0]["onExitCodes"]["values"] == exit_codes.codes("fail")
    pod = job["spec"]["template"]["spec"]
    assert {pod["securityContext"][key] for key in ("runAsUser", "runAsGroup", "fsGroup")} == {contract.RUN_AS_ID}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["JAX_PROCESS_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == contract.COMPLETION_INDEX_FIELD
