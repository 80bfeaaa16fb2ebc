"""Each fact the trainer, both renderers and the scripts share has one home: trainer/contract.py (what
the process reads), generator/engines/kubernetes/policy.py (what only manifests use), and the few
named in HOMES. The renders carry them, and no other hand-written file restates them: a scan of the
sources, the Dockerfile, the JSON files (the schema among them), the Helm templates, the shell
scripts and the docs, which a test shows to catch a planted copy of each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from generator.engines.kubernetes import policy, render_documents
from generator.values import load_values
from tests.support.paths import REPO_ROOT
from trainer import cluster, contract, exit_codes

CHART = REPO_ROOT / "charts" / "jax-training"
# The homes (the generator's by file name, wherever its package puts them), and the files
# `make generate` writes from them (test_generated_files.py checks those).
HOMES = {REPO_ROOT / "trainer" / name for name in ("contract.py", "cluster.py", "exit_codes.py")}
GENERATOR_HOMES = {"policy.py", "kueue.py", "targets.py"}
GENERATED = {CHART / "values.schema.json", CHART / "values.yaml", CHART / "README.md",
             REPO_ROOT / "scripts" / "lib" / "contract.sh",
             *(CHART / "files").glob("*.json")}
TEMPLATES = {".j2", ".tpl", ".yaml", ".txt"}  # the Jinja and Helm templates' suffixes


def _hand_written() -> list[Path]:
    found = [*(REPO_ROOT / "generator").rglob("*.py"), *(REPO_ROOT / "generator").rglob("*.j2"),
             *(CHART / "templates").rglob("*"), *(REPO_ROOT / "scripts").rglob("*.sh"),
             *(REPO_ROOT / "scripts").glob("*.py"), *(REPO_ROOT / "trainer").rglob("*.py"),
             *(REPO_ROOT / "trainer").glob("Dockerfile*"), *(REPO_ROOT / "variables").rglob("*.json"),
             *CHART.rglob("*.json"), *(REPO_ROOT / "docs").rglob("*.md"), *REPO_ROOT.glob("*.md"),
             *(REPO_ROOT / "generator").rglob("*.md"), *(REPO_ROOT / "trainer").rglob("*.md"),
             *(REPO_ROOT / "scripts").rglob("*.md")]
    return sorted({p for p in found if p.is_file() and p not in HOMES | GENERATED and "__pycache__" not in p.parts
                   and not (p.name in GENERATOR_HOMES and REPO_ROOT / "generator" in p.parents)})


SOURCES = _hand_written()
_CODES = "|".join(str(code) for entry in exit_codes.TABLE for code in [entry.code])
_LENGTHS = "|".join(map(str, policy.LENGTH_LIMITS.values()))

# fact -> (pattern, a planted restatement the scan must catch, the planted file's name)
RESTATED = {
    "the completion-index field": (re.escape(policy.COMPLETION_INDEX_FIELD),
                                   f'path = "{policy.COMPLETION_INDEX_FIELD}"', "planted.py"),
    "the completion-index key": (re.escape('"batch.kubernetes.io/job-completion-index"'),
                                 'KEY = "batch.kubernetes.io/job-completion-index"', "planted.py"),
    "the annotations limit": (rf"\b{policy.ANNOTATIONS_MAX_BYTES}\b|256 \* 1024",
                              "if size > 256 * 1024:", "planted.py"),
    "the system directories": (r'"/opt/venv",?\s*"/opt/jax-training"|"/",?\s*"/tmp"',
                               'DIRS = ("/", "/tmp")', "planted.py"),
    "the GPU limit": (rf"MAX_GPUS\w*\s*=|gt \$local {contract.MAX_GPUS_PER_HOST}\b",
                      f"{{{{- if gt $local {contract.MAX_GPUS_PER_HOST} -}}}}", "planted.tpl"),
    "the DNS limits": (rf"\w+_MAX\s*=\s*({policy.DNS_LABEL_MAX}|{policy.DNS_SUBDOMAIN_MAX})\b|"
                       rf"gt \(len .*\) ({policy.DNS_LABEL_MAX}|{policy.DNS_SUBDOMAIN_MAX})\b",
                       f"NAME_MAX = {policy.DNS_LABEL_MAX}", "planted.py"),
    "the schema's name-length limits": (rf'"maxLength":\s*({_LENGTHS})\b',
                                        f'      "maxLength": {policy.DNS_SUBDOMAIN_MAX},', "planted.json"),
    "the pods' uid": (rf"(runAsUser|runAsGroup|fsGroup|chown|RUN_AS_ID)\W+(-R\W+)?{policy.RUN_AS_ID}\b",
                      f"ARG RUN_AS_ID={policy.RUN_AS_ID}", "Dockerfile"),
    "the JobSet failure rule": (r"FailJobSet", '- action: FailJobSet', "planted.yaml"),
    "the process env names": (r'"JAX_COORDINATOR_ADDRESS",\s*"JAX_COORDINATOR_PORT"',
                              'NAMES = ("JAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_PORT")', "planted.py"),
    "the release selector": (r"app\.kubernetes\.io/(name|instance)=|[\"']app\.kubernetes\.io/(name|instance)[\"']",
                             'kubectl get pods -l app.kubernetes.io/name=jax-training,app.kubernetes.io/instance=x',
                             "planted.sh"),
    "the Kueue keys": (r"[\"']kueue\.x-k8s\.io/(queue-name|priority-class|podset-)",
                       '{{- $_ = set $labels "kueue.x-k8s.io/queue-name" $v.queue_name -}}', "planted.tpl"),
    "the GPU resource": (r"[\"']nvidia\.com/gpu[\"']", 'limits["nvidia.com/gpu"] = count', "planted.py"),
    "the checkpoints volume": (r"(name\W+|volume\(|list )[\"']checkpoints[\"']",
                               '{"name": "checkpoints", "mountPath": path}', "planted.py"),
    "the coordinator port": (rf"(PORT\s*=|\"default\":|coordinator_port\W+)\s*{cluster.DEFAULT_PORT}\b",
                             f'      "default": {cluster.DEFAULT_PORT}', "planted.json"),
    "the SLURM port formula": (rf"%\s*{len(cluster.SLURM_PORTS)}\s*\+\s*{cluster.SLURM_PORTS.start}|"
                               rf"\b{cluster.SLURM_PORTS.start}\s*\+\s*\w+\s*%|range\({cluster.SLURM_PORTS.start}",
                               "port `SLURM_JOB_ID % 4096 + 61440`", "planted.md"),
    # A template names an exit code by its constant (trainer/exit_codes.py), never by its number.
    "an exit code in a template comment": (rf"(#|\{{#|/\*).*\b(exit|code|signal|stop)\w*\b.*\b({_CODES})\b",
                                           "# pods that exit with 143 (a stop signal) are recreated", "planted.j2"),
}


# Where a fact is the user's to write or read: an example's own pod affinity selects the release's
# pods by their labels, and the docs' table of exit codes names each code's JobSet action.
USERS = {"the release selector": lambda path: REPO_ROOT / "variables" / "examples" in path.parents,
         "the JobSet failure rule": lambda path: path.suffix == ".md"}


def restatements(fact: str, paths) -> list[str]:
    pattern = re.compile(RESTATED[fact][0])
    templates_only = fact.startswith("an exit code")
    users = USERS.get(fact, lambda path: False)
    return [f"{path}:{n}" for path in paths if (not templates_only or path.suffix in TEMPLATES) and not users(path)
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("fact", sorted(RESTATED))
def test_no_source_restates_a_contract_fact(fact):
    found = restatements(fact, SOURCES)
    assert not found, f"{fact} restated (read its home instead): {found}"


@pytest.mark.parametrize("fact", sorted(RESTATED))
def test_the_scan_catches_a_planted_copy(fact, tmp_path):
    _, planted, name = RESTATED[fact]
    path = tmp_path / name
    path.write_text(f"first line\n{planted}\n")
    assert restatements(fact, [path]) == [f"{path}:2"]


def test_the_scan_reads_every_kind_of_file():
    kinds = {p.relative_to(REPO_ROOT).as_posix() for p in SOURCES}
    for expected in ("trainer/Dockerfile", "variables/schema.json", "charts/jax-training/templates/_pod.tpl",
                     "scripts/clean.sh", "docs/slurm.md", "generator/engines/kubernetes/templates/_pod.j2"):
        assert expected in kinds


@pytest.mark.parametrize("target", ["indexed-job", "jobset"])
def test_the_renders_carry_the_contract(target):
    values = load_values([], [f"target={target}"])
    job = next(d for d in render_documents(values) if d["kind"] in ("Job", "JobSet"))
    selector = dict(pair.split("=") for pair in policy.release_selector(values["name"]).split(","))
    assert selector.items() <= job["metadata"]["labels"].items()
    rules = policy.POD_FAILURE_RULES
    if job["kind"] == "JobSet":
        assert job["spec"]["failurePolicy"]["rules"] == list(policy.JOBSET_FAILURE_RULES)
        job = job["spec"]["replicatedJobs"][0]["template"]
        rules = policy.CHILD_JOB_FAILURE_RULES
    policy_rules = job["spec"]["podFailurePolicy"]["rules"]
    assert [rule["action"] for rule in policy_rules] == [action for action, _ in rules]
    assert policy_rules[0]["onExitCodes"]["values"] == exit_codes.codes("fail")
    pod = job["spec"]["template"]["spec"]
    assert {pod["securityContext"][key] for key in ("runAsUser", "runAsGroup", "fsGroup")} == {policy.RUN_AS_ID}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["JAX_PROCESS_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == policy.COMPLETION_INDEX_FIELD
    assert {v["name"] for v in pod["volumes"]} >= {policy.CHECKPOINTS_VOLUME}
    assert selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()
