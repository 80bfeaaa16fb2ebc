"""Code that travels with the job (image.source stock, program.dir): both renderers write the same
ConfigMap and pods (Helm given the archives through --set-file), refuse the same inputs in one line,
and the archives are the same bytes for the same files."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import tarfile

import pytest

from generator import shipping
from generator.errors import ValidationFailed
from generator.engines.kubernetes.shipped import INIT_CONTAINER

from .helm import comparable, helm_template, jaxgen_documents, write_values
from .test_parity import _diff

SEED = shipping.TRAINER_DIR.parents[1] / "shared" / "seed-programs"

CASES = {
    "indexed-job-stock-cpu": {"name": "s-indexed", "target": "indexed-job", "image": {"source": "stock"}},
    "jobset-stock-gpu-index": {"name": "s-jobset", "target": "jobset", "accelerator": "gpu", "local_device_count": 2,
                               "image": {"source": "stock", "pip_args": ["--index-url", "http://10.0.0.1/simple"]},
                               "annotations": {"team": "a"}},
    "jaxjob-stock-own-image": {"name": "s-jaxjob", "target": "jaxjob",
                               "image": {"source": "stock", "repository": "registry.example/jax", "tag": "1"}},
    "indexed-job-built-program": {"name": "s-program", "target": "indexed-job", "program": {
        "command": ["python", "allreduce.py"], "dir": "PROGRAM"}},
    "jobset-stock-program": {"name": "s-both", "target": "jobset", "image": {"source": "stock"},
                             "program": {"command": ["python", "query_v1.py"], "dir": "PROGRAM"}},
}


def _values(case: str, program: str) -> dict:
    values = {**CASES[case], "training": {"batch_size": 256}}
    if "program" in values:
        values["program"] = {**values["program"], "dir": program}
    return values


def _helm(tmp_path, values: dict, extra: tuple[str, ...] = ()):
    path = write_values(tmp_path, values["name"], values)
    files = []
    if values.get("image", {}).get("source") == "stock":
        (tmp_path / "trainer.b64").write_text(shipping.encoded(shipping.trainer_archive()))
        files += ["--set-file", f"image.trainer_archive={tmp_path / 'trainer.b64'}"]
    if values.get("program", {}).get("dir"):
        (tmp_path / "program.b64").write_text(shipping.encoded(shipping.program_archive(values["program"]["dir"])))
        files += ["--set-file", f"program.archive={tmp_path / 'program.b64'}"]
    return path, helm_template(values["name"], path, extra=("--skip-tests", *files, *extra))


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_renderers_ship_the_same(case, tmp_path):
    values = _values(case, str(SEED))
    path, result = _helm(tmp_path, values)
    assert result.returncode == 0, result.stderr
    expected = comparable(jaxgen_documents(path), "jaxgen")
    actual = comparable(result.documents(), "helm")
    assert [d["kind"] for d in actual] == [d["kind"] for d in expected]
    for got, want in zip(actual, expected):
        assert got == want, f"{want['kind']} differs (- jaxgen, + helm):\n{_diff(want, got)}"
    config_map = next(d for d in expected if d["kind"] == "ConfigMap")
    stock = values.get("image", {}).get("source") == "stock"
    assert ("trainer.tar.gz" in config_map["binaryData"]) == stock
    assert ("program.tar.gz" in config_map["binaryData"]) == ("program" in values)
    pods = [d for d in expected if d["kind"] not in ("ConfigMap", "Service", "NetworkPolicy")]
    spec = _pod_spec(pods[0])
    assert [c["name"] for c in spec["initContainers"]] == [INIT_CONTAINER]
    assert "nvidia.com/gpu" not in str(spec["initContainers"][0].get("resources"))
    trainer = spec["containers"][0]
    python_path = next(e["value"] for e in trainer["env"] if e["name"] == "PYTHONPATH")
    assert python_path.startswith(shipping.RUN_DIR if stock else shipping.BUILT_PYTHONPATH), python_path
    assert trainer.get("workingDir") == (f"{shipping.RUN_DIR}/program" if "program" in values else None)
    if case == "indexed-job-stock-cpu":
        assert trainer["image"] == "python:3.11.14-slim-bookworm"
    if case == "jobset-stock-gpu-index":
        assert trainer["image"] == "nvcr.io/nvidia/jax:26.07-py3"
        assert spec["initContainers"][0]["command"][-2:] == ["--index-url", "http://10.0.0.1/simple"]


def test_other_code_is_another_immutable_config_map(tmp_path):
    """The ConfigMap is named after its contents and immutable, in both renderers: a job rendered again
    after one file of its folder changed mounts another ConfigMap, so a pod restarted under the running
    job cannot unpack code its peers do not run."""
    names = []
    for version in ("1", "2"):
        folder = tmp_path / f"program-{version}"
        folder.mkdir()
        (folder / "train.py").write_text(f"VERSION = {version}\n")
        values = _values("indexed-job-built-program", str(folder))
        (tmp_path / version).mkdir()
        path, result = _helm(tmp_path / version, values)
        assert result.returncode == 0, result.stderr
        for documents in (jaxgen_documents(path), result.documents()):
            config_map = next(d for d in documents if d["kind"] == "ConfigMap")
            assert config_map["immutable"] is True
            job = next(d for d in documents if d["kind"] == "Job")
            volumes = {v["name"]: v for v in _pod_spec(job)["volumes"]}
            assert volumes[shipping.VOLUME]["configMap"]["name"] == config_map["metadata"]["name"]
            names.append(config_map["metadata"]["name"])
    assert names[0] == names[1] != names[2] == names[3], names
    assert all(name.startswith("s-program-shipped-") for name in names), names


def _pod_spec(doc: dict) -> dict:
    node = doc["spec"]
    for key in ("replicatedJobs", "jaxReplicaSpecs"):
        if key in node:
            first = node[key][0] if isinstance(node[key], list) else next(iter(node[key].values()))
            node = first["template"]["spec"] if "template" in first and "spec" in first["template"].get(
                "spec", {}) else first
    while "template" in node:
        node = node["template"]["spec"]
    return node


def test_a_built_render_has_no_shipped_parts(tmp_path):
    docs = jaxgen_documents(write_values(tmp_path, "plain", {"name": "plain"}))
    assert "ConfigMap" not in [d["kind"] for d in docs]
    assert "initContainers" not in str(docs) and "PYTHONPATH" not in str(docs)


@pytest.mark.parametrize("values, line", [
    ({"image": {"source": "stock"}}, "$.image.source: stock needs a target whose object holds the pod"),
    ({"program": {"command": ["python", "a.py"], "dir": "TMP"}}, "$.program.dir: a program folder needs a target"),
])
def test_trainjob_is_refused_by_both(tmp_path, values, line):
    values = {"name": "s-trainjob", "target": "trainjob", **values}
    if "program" in values:
        values["program"] = {**values["program"], "dir": str(tmp_path)}
    path, result = _helm(tmp_path, values)
    assert result.returncode != 0 and line in result.stderr, result.stderr
    with pytest.raises(ValidationFailed) as error:
        jaxgen_documents(path)
    assert any(problem.startswith(line) for problem in error.value.errors), error.value.errors


def test_helm_without_the_archive_says_which_file_to_set(tmp_path):
    path = write_values(tmp_path, "s", {"name": "s", "image": {"source": "stock"}})
    result = helm_template("s", path)
    assert result.returncode != 0
    assert "$.image.trainer_archive: image.source stock needs the trainer's archive: helm --set-file" in result.stderr


def test_helm_refuses_an_archive_that_is_not_base64(tmp_path):
    """--set-file of the raw tar.gz instead of the file python -m generator.shipping writes: one line naming
    the field, where the API server would have refused the ConfigMap's binaryData."""
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    (tmp_path / "raw.tgz").write_bytes(shipping.program_archive(str(folder)))
    path = write_values(tmp_path, "s", {"name": "s", "program": {"command": ["python", "train.py"],
                                                                   "dir": str(folder)}})
    result = helm_template("s", path, extra=("--set-file", f"program.archive={tmp_path / 'raw.tgz'}"))
    assert result.returncode != 0
    assert "$.program.archive: not base64: give the file `python -m generator.shipping` writes" in result.stderr


def test_archives_are_reproducible_and_carry_the_checkout():
    first, second = shipping.trainer_archive(), shipping.trainer_archive()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {0}
        version = tar.extractfile("trainer/__init__.py").read().decode()
    assert "trainer/train.py" in names and "trainer/Dockerfile" not in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert (shipping.TRAINER_DIR / "__init__.py").read_text() == version
    assert base64.b64decode(shipping.encoded(first)) == first


@pytest.mark.parametrize("plant, message", [
    ("link-out", "is a link leaving the folder"),
    ("fifo", "is a device, socket or pipe, not a file"),
    ("too-big", "bytes of files, more than 4194304 (4 MiB)"),
    ("packs-big", "more than 786432 (768 KiB, what a ConfigMap leaves it)"),
    ("missing", "is not a folder"),
    ("dangling", "dangling cannot be read: No such file or directory"),
    ("loop", "cannot be read: Symlink loop"),
])
def test_a_folder_that_cannot_travel_is_refused_in_one_line(tmp_path, plant, message):
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    if plant == "link-out":
        (folder / "data").symlink_to("/etc/hostname")
    elif plant == "fifo":
        os.mkfifo(folder / "pipe")
    elif plant == "too-big":
        (folder / "big.bin").write_bytes(b"\0" * (4 * 1024 * 1024 + 1))
    elif plant == "packs-big":
        (folder / "noise.bin").write_bytes(os.urandom(800 * 1024))
    elif plant == "dangling":
        (folder / "dangling").symlink_to("nowhere")
    elif plant == "loop":
        (folder / "a").symlink_to("b")
        (folder / "b").symlink_to("a")
    else:
        folder = tmp_path / "nothing"
    values = {"name": "s", "program": {"command": ["python", "train.py"], "dir": str(folder)}}
    path = write_values(tmp_path, "s", values)
    with pytest.raises(shipping.ShippingError) as error:
        jaxgen_documents(path)
    assert str(error.value).startswith("$.program.dir: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_hidden_entries_stay_behind(tmp_path):
    """.env, .git and the like never travel: a ConfigMap is readable by whoever may read the namespace's
    ConfigMaps, and Helm keeps a copy in its release."""
    folder = tmp_path / "program"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".env").write_text("TOKEN=secret\n")
    (folder / "train.py").write_text("print('hi')\n")
    with tarfile.open(fileobj=io.BytesIO(shipping.program_archive(str(folder)))) as tar:
        assert tar.getnames() == ["train.py"]


def test_the_archive_command_says_what_is_wrong_in_one_line_and_exit_2(tmp_path):
    for argv, said in (([], "usage: python -m generator.shipping"),
                       (["program", str(tmp_path / "nothing")], "error: $.program.dir: ")):
        done = subprocess.run([sys.executable, "-m", "generator.shipping", *argv], capture_output=True, text=True,
                              cwd=shipping.TRAINER_DIR.parent, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr


def test_a_link_inside_the_folder_travels_as_its_file(tmp_path):
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "main.py").symlink_to("train.py")
    with tarfile.open(fileobj=io.BytesIO(shipping.program_archive(str(folder)))) as tar:
        assert tar.extractfile("main.py").read() == b"print('hi')\n"


@pytest.mark.parametrize("target", ["indexed-job", "jobset", "jaxjob"])
def test_a_shipping_render_is_valid_for_every_supported_kubernetes(tmp_path, target):
    from tests.support.manifests import KUBERNETES_VERSIONS, validation_problems
    for version in KUBERNETES_VERSIONS:
        values = {"name": "s-valid", "target": target, "kube_version": version, "image": {"source": "stock"},
                  "program": {"command": ["python", "allreduce.py"], "dir": str(SEED)}}
        docs = jaxgen_documents(write_values(tmp_path, f"s-{version}", values))
        assert "ConfigMap" in [d["kind"] for d in docs]
        for doc in docs:
            assert validation_problems(doc, version) == [], (version, doc["kind"])
