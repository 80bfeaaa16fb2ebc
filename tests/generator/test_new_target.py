"""A dry run of adding a Kubernetes target, counted from git: in a copy of this checkout, add a
LeaderWorkerSet target the way generator/README.md ("Adding a Kubernetes target") says (its row and
one template per renderer), run `make generate`'s script, check the generated files and the tests
that hold a target to its row (the twins, the target table, Kueue, the two renderers' parity for it),
then count the files git sees changed: at most 5, prose and generated files included. The contributor
writes 3 (the row and the twins); `make generate` rewrites 2 (the schema's target enum and the chart
README's target table, which the other docs link to) and puts the row's chart facts at the end of the
new Helm template.

The copy's ../shared is this checkout's, so the strict CRD validation (tests/support/manifests.py)
is left out: a new kind's CRD goes to ../shared/crds, outside the repository."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED_DIR

NAME = "leaderworkerset"
ROW = '''\
    # LeaderWorkerSet: one group of hosts_count pods behind the headless Service <name>.
    Target("leaderworkerset", "kubernetes", "leaderworkerset.yaml.j2", JAX, (), Workload(
        "LeaderWorkerSet", "leaderworkersets.leaderworkerset.x-k8s.io", Hosts(replica=("0",)),
        "leaderworkerset.sigs.k8s.io/name={name}", "Available",
        pod_spec_path=("spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
        index_label="leaderworkerset.sigs.k8s.io/worker-index", suspend_path=()),
        Needs("[LeaderWorkerSet](https://github.com/kubernetes-sigs/lws) controller")),
'''
# The two templates share their body; each renderer's own syntax fills in the values.
BODY = """\
spec:
  replicas: 1
  startupPolicy: LeaderCreated
  networkConfig:
    subdomainPolicy: Shared
  leaderWorkerTemplate:
    size: {size}
    restartPolicy: RecreateGroupOnPodRestart
    workerTemplate:
      {pod}
"""
HEAD = "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
JINJA = ('{%- from "_pod.j2" import pod_template, metadata with context -%}\n{%- set v = values -%}\n' + HEAD
         + '{{ metadata(v, labels("training", queue=true)) }}\n'
         + BODY.format(size="{{ v.hosts_count | tojson }}", pod="{{ pod_template(v) | indent(6) }}"))
HELM = ('{{- if eq .Values.target "leaderworkerset" }}\n{{- $v := .Values }}\n' + HEAD
        + '{{ include "jax-training.metadata" (dict "root" . "labels" (include "jax-training.labels" (dict "root" . '
          '"component" "training" "queue" true "chart" true) | fromJson)) }}\n'
        + BODY.format(size="{{ int64 $v.hosts_count }}",
                      pod='{{- include "jax-training.podTemplate" (dict "root" .) | nindent 6 }}').rstrip("\n")
        + "\n{{- end }}\n")
HAND_WRITTEN = {"generator/targets.py", f"generator/engines/kubernetes/templates/{NAME}.yaml.j2",
                f"charts/jax-training/templates/{NAME}.yaml"}
# What make generate rewrites beside them (it also ends the new Helm template with its row's facts).
GENERATED_CHANGES = {"charts/jax-training/values.schema.json", "charts/jax-training/README.md"}
# Run whole: the files that hold a row to its templates, its docs and the table's own rules.
WHOLE = ["tests/chart/test_layout.py", "tests/generator/test_docs_targets.py", "tests/generator/test_targets.py",
         "tests/generator/test_kueue.py"]
# Run for the new target only: both renderers alike, and what reads its pod template from the row.
FOR_IT = ["tests/chart/test_parity.py", "tests/generator/test_network_policy.py",
          "tests/generator/test_metrics_render.py"]


def _run(*args: str, cwd: Path) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result.stdout


def _copy(root: Path) -> Path:
    """This checkout's files (tracked and not ignored) as the first commit of a repository beside a ../shared."""
    repo = root / "repo"
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO_ROOT)
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_symlink() or source.is_file():  # a link stays a link (generator/data/ -> the chart's)
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name, follow_symlinks=False)
    if SHARED_DIR.is_dir():
        (root / "shared").symlink_to(SHARED_DIR)
    git = ("git", "-c", "user.name=dry run", "-c", "user.email=dry-run@example.invalid")
    _run("git", "init", "-q", cwd=repo)
    _run("git", "add", "-A", cwd=repo)
    _run(*git, "commit", "-qm", "before the new target", cwd=repo)
    return repo


def _generated_paths() -> set[str]:
    spec = importlib.util.spec_from_file_location("generate", REPO_ROOT / "scripts" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {str(path.relative_to(REPO_ROOT)) for path in module.outputs()}


def add_target(repo: Path) -> None:
    """What a contributor writes: the row (before slurm's, the table's Kubernetes rows first) and the twins."""
    table = repo / "generator" / "targets.py"
    text = table.read_text()
    anchor = '    Target("slurm", '
    assert text.count(anchor) == 1, "the dry run inserts its row before slurm's"
    table.write_text(text.replace(anchor, ROW + anchor))
    (repo / "generator" / "engines" / "kubernetes" / "templates" / f"{NAME}.yaml.j2").write_text(JINJA)
    (repo / "charts" / "jax-training" / "templates" / f"{NAME}.yaml").write_text(HELM)


@pytest.mark.slow
def test_a_new_kubernetes_target_is_at_most_five_files_written_by_hand(tmp_path):
    repo = _copy(tmp_path)
    add_target(repo)
    _run(sys.executable, "scripts/generate.py", cwd=repo)
    _run(sys.executable, "scripts/generate.py", "--check", cwd=repo)
    selected = " or ".join(Path(path).stem for path in FOR_IT)
    tests = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not e2e", *WHOLE, *FOR_IT,
                 "-k", f"{NAME} or not ({selected})", cwd=repo)
    _run("git", "add", "-A", cwd=repo)
    changed = set(_run("git", "diff", "--cached", "--name-only", cwd=repo).split())
    generated = changed & _generated_paths()
    by_hand = changed - generated
    print(tests.strip().splitlines()[-1])
    print(f"{len(changed)} files changed: {len(by_hand)} by hand {sorted(by_hand)}, "
          f"{len(generated)} generated {sorted(generated)}")
    assert by_hand == HAND_WRITTEN, "a new target needs more than its row and its two templates"
    assert generated == GENERATED_CHANGES, "make generate rewrites more than the target enum and the table"
    assert len(changed) <= 5
