"""The Kubernetes engine (an engines.base.Engine): each target's job object (and its Service, claim or
runtime) from the templates in templates/, one per target plus the pod template they share (_pod.j2);
its rules (checks.py), the cluster's jobs (jobs.py), `jaxgen check` (preflight.py) and the local
runner of its pod spec (local/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .checks import errors, warnings
from .release import release_files
from .render import PodContext, files, render_documents, render_text, stream

__all__ = ["Options", "PodContext", "check", "errors", "files", "jobs_at", "release_files", "render_documents",
           "render_text", "run_local", "stream", "warnings"]


@dataclass(frozen=True)
class Options:
    """Where the cluster is, as kubectl takes it (None: kubectl's own choice: $KUBECONFIG, the current
    context, the context's namespace)."""
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def check(values: dict, options: Options) -> tuple[list[str], list[str], list[str], str]:
    from .kubectl import ClusterError, Forbidden, Kubectl
    from .preflight import check as ask
    from .preflight import offline_warnings

    try:
        kube = Kubectl(options.context, values["namespace"] or None, options.kubeconfig)
        if problem := kube.config_problem():
            raise ClusterError(problem)
        try:
            passed, failed, warned = ask(values, kube)
        except Forbidden:
            raise
        except ClusterError as error:
            raise ClusterError(f"{kube.where()}: {error}") from None
    except ClusterError as error:
        error.warned = offline_warnings(values)  # what the render alone says, for the offline report
        raise
    return passed, failed, warned, f"namespace {kube.namespace}"


def jobs_at(options: Options):
    from .jobs import ClusterJobs

    return ClusterJobs(options.context, options.namespace)


def run_local(values: dict, kept: Path | None, work_dir: str | None, keep: bool) -> int:
    from .local import run_local as run

    return run(values, kept, work_dir, keep)
