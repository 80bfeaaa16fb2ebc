"""The trainer image a job runs. An empty image.tag is the release's version with the accelerator's
variant, the tags scripts/image.sh builds: a CPU job never pulls the CUDA image."""

import json

from trainer import __version__

# accelerator -> image variant (trainer/Dockerfile's JAX_VARIANT, scripts/image.sh --variant).
VARIANTS = {"cpu": "cpu", "gpu": "cuda12"}


def tag(values: dict) -> str:
    return values["image"]["tag"] or f"{__version__}-{VARIANTS[values['accelerator']]}"


def reference(values: dict) -> str:
    return f"{values['image']['repository']}:{tag(values)}"


def unpublished(values: dict, default_repository: str) -> str:
    """Why the image cannot be pulled where the job runs: the default repository, which no release has
    published yet ("" for any other image)."""
    image = values["image"]
    if image["repository"] != default_repository or image.get("digest"):
        return ""
    return (f"image {reference(values)} is not published: build and push it with scripts/image.sh --variant "
            f"{VARIANTS[values['accelerator']]} --push REGISTRY/jax-training, then set "
            "image.repository=REGISTRY/jax-training")


def variants_json() -> str:
    """The table for the chart (files/image-variants.json, make generate)."""
    return json.dumps(VARIANTS, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(" ".join(sorted(set(VARIANTS.values()))))  # scripts/image.sh's --variant choices
