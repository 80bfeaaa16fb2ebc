"""The image a job pulls follows the accelerator: an empty image.tag is the release's version with the
variant scripts/image.sh builds, in jaxgen and in the chart; a tag the user sets is kept."""

import pytest

from generator import images
from generator.targets import KUBERNETES
from trainer import __version__

from .helm import helm_template, jaxgen_documents, write_values

CASES = {
    "cpu-default": ({"accelerator": "cpu"}, f"ghcr.io/jax-training/trainer:{__version__}-cpu"),
    "gpu-default": ({"accelerator": "gpu"}, f"ghcr.io/jax-training/trainer:{__version__}-cuda12"),
    "own-tag": ({"accelerator": "gpu", "image": {"repository": "registry.example.com/me/jax", "tag": "v7"}},
                "registry.example.com/me/jax:v7"),
}


def image_references(docs: list[dict]) -> set[str]:
    """Every `image:` of the documents (pod templates, a TrainJob's trainer, a TrainingRuntime's)."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            found.update(v for k, v in node.items() if k == "image" and isinstance(v, str))
            node = list(node.values())
        if isinstance(node, list):
            for value in node:
                walk(value)

    walk(docs)
    return found


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("case", CASES)
def test_the_image_follows_the_accelerator(tmp_path, case, target):
    values, expected = CASES[case]
    path = write_values(tmp_path, "v", {**values, "target": target})
    for engine, docs in (("jaxgen", jaxgen_documents(path)), ("helm", helm_template("rel", path).documents())):
        refs = image_references(docs)
        assert refs == {expected}, f"{engine}: {refs}"
        versions = {d["metadata"]["labels"]["app.kubernetes.io/version"] for d in docs if d["kind"] != "ConfigMap"}
        assert versions == {expected.rsplit(":", 1)[1]}, f"{engine}: {versions}"


def test_every_accelerator_has_a_variant():
    import json

    from tests.support.paths import SCHEMA_FILE

    schema = json.loads(SCHEMA_FILE.read_text())
    assert set(images.VARIANTS) == set(schema["properties"]["accelerator"]["enum"])
