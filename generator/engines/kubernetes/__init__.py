"""The Kubernetes renderer: each target's job object (and its Service, claim or runtime) from the
templates in templates/, one per target plus the pod template they share (_pod.j2)."""

from .render import PodContext, files, render_documents, render_text, stream

__all__ = ["PodContext", "files", "render_documents", "render_text", "stream", "errors"]


def errors(values: dict) -> list[str]:
    """Rules of this engine beyond generator/checks.py's: none (the Kubernetes rules are the chart's too,
    so they stay beside their twins in templates/_validate.tpl)."""
    return []
