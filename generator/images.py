"""The image a job runs. An empty image.tag is the release's version with the accelerator's variant,
the tags scripts/image.sh builds: a CPU job never pulls the CUDA image. A stock image (image.source
stock) left at the default repository and tag is the accelerator's default stock image."""

import json
import re
import sys
from functools import lru_cache

from trainer import __version__

from .paths import SCHEMA_FILE
from .targets import KUBERNETES

# accelerator -> image variant (trainer/Dockerfile's JAX_VARIANT, scripts/image.sh --variant).
VARIANTS = {"cpu": "cpu", "gpu": "cuda12"}


# accelerator -> the default stock image (repository, tag): an official Python image for CPUs (the
# built image's base), NVIDIA's published JAX container for GPUs: 26.07-py3, the newest whose contents
# published runs of it report (Python 3.12.3 as `python`, pip, JAX 0.10.2.dev20260630: a build of jax
# before 0.10.2, which trainer/versions.py's range takes; docs/images.md).
STOCK_IMAGES = {"cpu": ("python", "3.11.14-slim-bookworm"), "gpu": ("nvcr.io/nvidia/jax", "26.07-py3")}


def _stock_default(values: dict) -> tuple[str, str] | None:
    image = values["image"]
    if image.get("source") != "stock" or image["tag"] or image["digest"]:
        return None
    return STOCK_IMAGES[values["accelerator"]] if image["repository"] == default_repository() else None


@lru_cache(maxsize=1)
def default_repository() -> str:
    """The schema's default image.repository, which a stock image left at it stands for the default
    stock image."""
    return json.loads(SCHEMA_FILE.read_text())["properties"]["image"]["properties"]["repository"]["default"]


def repository(values: dict) -> str:
    return (_stock_default(values) or (values["image"]["repository"],))[0]


def tag(values: dict) -> str:
    stock = _stock_default(values)
    return stock[1] if stock else values["image"]["tag"] or f"{__version__}-{VARIANTS[values['accelerator']]}"


def reference(values: dict) -> str:
    """repository@digest when image.digest pins the image, else repository:tag."""
    image = values["image"]
    return f"{image['repository']}@{image['digest']}" if image["digest"] else f"{repository(values)}:{tag(values)}"


def pull_policy(values: dict) -> str:
    """image.pull_policy, or where empty what Kubernetes defaults it to for the reference: Always for
    the tag latest, else IfNotPresent (a digest names one image for ever)."""
    image = values["image"]
    if image["pull_policy"]:
        return image["pull_policy"]
    return "Always" if not image["digest"] and tag(values) == "latest" else "IfNotPresent"


# A repository as container runtimes parse an image reference (the distribution project's grammar,
# lower case as the schema asks): [registry[:port]/]path, each path component letters and digits
# joined by one '.', one or two '_' or dashes. Python's re and Go's RE2 (the chart) read it alike.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::[0-9]+)?"
REPOSITORY_PATTERN = rf"^(?:{_REGISTRY}/)?{_COMPONENT}(?:/{_COMPONENT})*$"


def unpublished(values: dict, default_repository: str) -> str:
    """Why the image cannot be pulled where the job runs: the default repository, which no release has
    published yet ("" for any other image)."""
    image = values["image"]
    if image["repository"] != default_repository or image.get("digest") or image.get("source") == "stock":
        return ""
    return (f"image {reference(values)} is not published: build and push it with scripts/image.sh --variant "
            f"{VARIANTS[values['accelerator']]} --push REGISTRY/jax-training, then set "
            "image.repository=REGISTRY/jax-training")


def variants_json() -> str:
    """The table for the chart (files/image-variants.json, make generate): the variants, the default
    stock images as [repository, tag] and the schema's default repository, which stands for them."""
    table = {**VARIANTS, "stock": {accelerator: list(image) for accelerator, image in STOCK_IMAGES.items()},
             "defaultRepository": default_repository()}
    return json.dumps(table, indent=2, sort_keys=True) + "\n"


# A tag scripts/image.sh gives one build only: <version>-<commit>[-dirty<hash>]-<variant>[-trixie].
_COMMIT_TAG = re.compile(r"-[0-9a-f]{7,40}(-dirty[0-9a-f]{8})?-")


def mutable_tag_warning(values: dict) -> str:
    """Why the pods may run another build than the one named ("" when they cannot): a tag that moves
    (image.sh's <version>-<variant>, or any tag but its commit tags) pulled IfNotPresent, so that a
    node that has an older image under it keeps running that one."""
    if values["target"] not in KUBERNETES or values["image"]["digest"] or pull_policy(values) != "IfNotPresent" \
            or _COMMIT_TAG.search(tag(values)):
        return ""
    pin = ("pin it with image.digest" if values["image"].get("source") == "stock" else
           "pin the build with image.digest (scripts/image.sh --push prints the --set line) or its commit tag "
           "(<version>-<commit>-<variant>)")
    return (f"warning: image {reference(values)} is a tag that may move, pulled IfNotPresent: a node that "
            f"already has an image of that name runs it, whatever was pushed since; {pin}, or set "
            "image.pull_policy=Always")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--warn"]:  # scripts/prepare.sh, on the merged variables of a render
        with open(sys.argv[2]) as values_file:
            warning = mutable_tag_warning(json.load(values_file))
        if warning:
            print(warning, file=sys.stderr)
    else:
        print(" ".join(sorted(set(VARIANTS.values()))))  # scripts/image.sh's --variant choices
