"""The job object's record of where its outputs are (generator/runstore/location.py): written by both
renderers as annotations (the chart's twin: jax-training.outputsAnnotations in _names.tpl), read back by
`jaxgen status` and `jaxgen run` instead of the container's args."""

from __future__ import annotations

from ...runstore.location import Outputs, of_values
from .policy import OUTPUTS_DIR_ANNOTATION, OUTPUTS_URI_ANNOTATION

# What status says of a job object without the record.
NOT_RECORDED = (f"not recorded: the job object has no {OUTPUTS_DIR_ANNOTATION} annotation (rendered by an older "
                "jaxgen or chart)")


def annotations(values: dict) -> dict[str, str]:
    outputs = of_values(values)
    return {OUTPUTS_DIR_ANNOTATION: outputs.directory, **({OUTPUTS_URI_ANNOTATION: outputs.uri} if outputs.uri else {})}


def recorded(obj: dict) -> Outputs | None:
    """The outputs a job object's annotations record, or None (an object rendered before they were)."""
    found = (obj.get("metadata") or {}).get("annotations") or {}
    directory, uri = found.get(OUTPUTS_DIR_ANNOTATION), found.get(OUTPUTS_URI_ANNOTATION)
    if not isinstance(directory, str) or not directory:
        return None
    return Outputs(directory, uri if isinstance(uri, str) else "")
