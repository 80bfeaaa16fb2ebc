"""Where a job's outputs are, decided once at render time from its variables and recorded where each
reader finds it: annotations on the job object (both renderers write them, generator/engines/kubernetes/
outputs.py; `jaxgen status` and `jaxgen run` read them back), OUTPUTS_DIR and OUTPUTS_URI in the build
folder's release.env (scripts/run.sh), and a local run's record. Nothing parses the rendered argv for it.

The bucket's `<uri>/<name>` is composed by trainer.bucket.job_uri alone, where the trainer writes (the
chart's twin: jax-training.outputsAnnotations in _names.tpl)."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.bucket import job_uri


@dataclass(frozen=True)
class Outputs:
    """A job's outputs: `directory`, <checkpoint.dir>/<name> in its containers (or on the SLURM nodes);
    `uri`, the bucket's copy <outputs.uri>/<name>, or ""."""

    directory: str
    uri: str = ""

    def release_env(self) -> dict[str, str]:
        return {"OUTPUTS_DIR": self.directory, "OUTPUTS_URI": self.uri}


def of_values(values: dict) -> Outputs:
    """The outputs of the job these (validated) variables render: the trainer's --checkpoint-dir,
    --run-name and --outputs-uri are rendered from them, and program.args may not set them."""
    name, uri = values["name"], values["outputs"]["uri"]
    return Outputs(f"{values['checkpoint']['dir'].rstrip('/')}/{name}", job_uri(uri, name) if uri else "")
