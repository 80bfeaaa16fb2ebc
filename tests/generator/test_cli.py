"""The jaxgen command line: options, output formats, atomic directories, no jax import."""

import json
import subprocess
import sys

import pytest
import yaml

from generator.engines.kubernetes.policy import CHECKPOINTS_VOLUME
from generator.targets import KUBERNETES, NAMES
from tests.support.jaxgen import jaxgen
from tests.support.manifests import pod_templates
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT, SCHEMA_FILE

SEED = str(EXAMPLES_DIR / "seed.json")


def test_version_and_help():
    assert jaxgen("--version").stdout.startswith("jaxgen, version ")
    for command in ([], ["render"], ["validate"], ["schema"], ["defaults"]):
        result = jaxgen(*command, "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_render_o_says_what_it_wrote(tmp_path):
    result = jaxgen("render", SEED, "-o", str(tmp_path / "out"))
    assert result.exit_code == 0 and result.stdout == ""
    written = sorted(p.name for p in (tmp_path / "out").glob("*.yaml"))
    assert f"wrote {len(written)} file(s) into {tmp_path / 'out'}: " in result.stderr
    assert all(name in result.stderr for name in written) and len(written) == 3  # Service, Job, NetworkPolicy


def test_a_missing_file_points_at_the_examples(tmp_path):
    result = jaxgen("render", "variables.json")
    assert result.exit_code == 2 and "variables.json: no such file" in result.stderr
    hint = result.stderr.split("examples: ", 1)[1].split(" ", 1)[0]
    assert (REPO_ROOT / hint).is_dir() and any((REPO_ROOT / hint).glob("*.json")), hint


def test_schema_prints_the_schema_file():
    result = jaxgen("schema")
    assert json.loads(result.stdout) == json.loads(SCHEMA_FILE.read_text())


def test_seed_renders_a_complete_job():
    docs = jaxgen("render", SEED).documents()
    service, job, policy = docs
    assert policy["kind"] == "NetworkPolicy"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["JAX_COORDINATOR_ADDRESS"]["value"] == "jax-training-0.jax-training:1234"
    assert env["JAX_NUM_PROCESSES"]["value"] == "2"
    assert "job-completion-index" in env["JAX_PROCESS_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--local-device-count") + 1] == "2"


def test_set_and_extra_files_merge_in_order(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("training:\n  epochs: 7\nlabels:\n  team: vision\n")
    docs = jaxgen("render", SEED, "-f", str(extra), "--set", "training.epochs=9", "--target", "jaxjob").documents()
    jaxjob = next(doc for doc in docs if doc["kind"] == "JAXJob")
    (pod,) = pod_templates(docs)
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--epochs") + 1] == "9"
    assert jaxjob["metadata"]["labels"]["team"] == "vision"
    assert args[args.index("--batch-size") + 1] == "128"  # untouched keys keep the defaults


def test_user_labels_cannot_break_selectors():
    docs = jaxgen("render", "--set", "labels.app\\.kubernetes\\.io/instance=other").documents()
    assert docs[1]["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"] == "jax-training"


def test_stdin_and_json_format():
    result = jaxgen("render", "-", "--format", "json", stdin='{"hosts_count": 4}')
    listing = json.loads(result.stdout)
    assert listing["kind"] == "List" and [i["kind"] for i in listing["items"]] == ["Service", "Job", "NetworkPolicy"]


def test_output_directory_is_replaced_as_a_whole(tmp_path):
    out = tmp_path / "build"
    assert jaxgen("render", SEED, "-o", str(out)).exit_code == 0
    assert sorted(p.name for p in out.glob("*.yaml")) == ["job-jax-training.yaml", "networkpolicy-jax-training.yaml",
                                                          "service-jax-training.yaml"]
    assert jaxgen("render", SEED, "--target", "jaxjob", "--set", "network_policy.enabled=false", "-o", str(out)).exit_code == 0
    assert sorted(p.name for p in out.glob("*.yaml")) == ["jaxjob-jax-training.yaml", "service-jax-training-coord.yaml"]
    assert yaml.safe_load((out / "jaxjob-jax-training.yaml").read_text())["kind"] == "JAXJob"
    assert [p.name for p in tmp_path.iterdir()] == ["build"]  # no staging leftovers


def test_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = jaxgen("render", SEED, "-o", str(tmp_path))
    assert result.exit_code == 2 and "did not write" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_validate_reports_each_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hosts_count": 0}')
    result = jaxgen("validate", SEED, str(bad))
    assert result.exit_code == 2
    assert f"{SEED}: valid" in result.stdout and "$.hosts_count" in result.stderr


def test_render_never_imports_jax():
    code = ("import sys; from generator.cli import cli\n"
            "try:\n    cli(['render', %r])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = [m for m in ('jax', 'jaxlib', 'numpy', 'matplotlib', 'optax') if m in sys.modules]\n"
            "assert not heavy, heavy\n") % SEED
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT, capture_output=True)


def test_null_removes_a_default_mapping_as_in_helm():
    docs = jaxgen("render", "-", stdin='{"resources": {"requests": null}}').documents()
    resources = docs[1]["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"memory": "4Gi"}}
    result = jaxgen("render", "-", stdin='{"labels": null}')
    assert result.exit_code == 2 and "'labels' is a required property" in result.stderr


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, '{"a": ' + "[" * 5000 + "]" * 5000 + "}",
                                  "affinity: " + "[" * 70 + "]" * 70])
def test_deep_nesting_is_one_line(text):
    result = jaxgen("validate", "-", stdin=text)
    assert result.exit_code == 2
    assert "nested more than 64 levels deep" in result.stderr and "Traceback" not in result.stderr
    for depth in (100, 5000):
        result = jaxgen("render", "--set-json", "affinity.x=" + "[" * depth + "]" * depth)
        assert result.exit_code == 2 and "--set-json" in result.stderr and "nested" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_keys_read_as_go_reads_them():
    docs = jaxgen("render", "-", stdin="labels:\n  1: x\n  b: yy\n").documents()
    assert {"1": "x", "b": "yy"}.items() <= docs[1]["metadata"]["labels"].items()
    refused = jaxgen("render", "-", stdin="labels:\n  b: y\n")  # y is a boolean to Helm, as to go-yaml
    assert refused.exit_code == 2 and "$.labels.b: true is not of type" in refused.stderr
    docs = jaxgen("render", "-", stdin="labels:\n  a: x\n  a: z\n").documents()  # the last wins, as in Helm
    assert docs[1]["metadata"]["labels"]["a"] == "z"
    for text in ('labels:\n  1: x\n  "1": z\n', "labels:\n  1.0: x\n  1: z\n", "labels:\n  true: x\n  'true': z\n"):
        result = jaxgen("render", "-", stdin=text)  # Helm keeps either at random
        assert result.exit_code == 2 and "key given twice, as " in result.stderr and "NonStringKey" not in result.stderr


def test_whole_floats_are_integers_in_json():
    result = jaxgen("render", "-", "--format", "json", stdin='{"hosts_count": 2.0, "training": {"epochs": 3.0}}')
    job = json.loads(result.stdout)["items"][1]
    assert '"parallelism": 2,' in result.stdout and job["spec"]["parallelism"] == 2
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--epochs") + 1] == "3"


def test_empty_output_dir_is_an_error():
    result = jaxgen("render", "-o", "")
    assert result.exit_code == 2 and "-o/--output-dir: empty path" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("target", KUBERNETES)
def test_the_outputs_on_an_emptydir_are_a_warning_and_a_claim_keeps_them(target, tmp_path):
    from generator.engines.kubernetes.checks import EMPTYDIR_WARNING, UNBOUNDED_RESTARTS_WARNING
    from generator.targets import workload

    # (a JAXJob's render also says that nothing bounds its restarts)
    unbounded = "" if workload(target).counts_restarts else f"warning: {UNBOUNDED_RESTARTS_WARNING}\n"
    default = jaxgen("render", "--target", target)
    assert default.exit_code == 0 and default.stderr == f"warning: {EMPTYDIR_WARNING}\n{unbounded}"
    assert all(doc["kind"] != "PersistentVolumeClaim" for doc in default.documents())
    kept = jaxgen("render", "--target", target, "--set", "persistence.enabled=true", "-o", str(tmp_path / "out"))
    assert kept.exit_code == 0 and kept.stderr.startswith(unbounded + "wrote ") and EMPTYDIR_WARNING not in kept.stderr
    # kubectl apply -f DIR takes the files by name: the claim before the job whose pods mount it.
    files = sorted(p.name for p in (tmp_path / "out").glob("*.yaml"))
    assert files[0] == "0-persistentvolumeclaim-jax-training-outputs.yaml" and len(files) > 1
    claim = yaml.safe_load((tmp_path / "out" / files[0]).read_text())
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    assert claim["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    mounted = [v for d in (tmp_path / "out").glob("*.yaml") for v in _volumes(yaml.safe_load(d.read_text()))
               if v["name"] == CHECKPOINTS_VOLUME]
    assert mounted == [{"name": CHECKPOINTS_VOLUME, "persistentVolumeClaim": {"claimName": "jax-training-outputs"}}]
    existing = jaxgen("render", "--target", target, "--set", "persistence.existing_claim=results")
    assert existing.stderr == unbounded and all(doc["kind"] != "PersistentVolumeClaim" for doc in existing.documents())
    assert "claimName: results" in existing.stdout


def test_kubectl_takes_what_a_trainjob_needs_first(tmp_path):
    """An own TrainingRuntime and the outputs claim sort before the TrainJob that names them."""
    out = tmp_path / "out"
    result = jaxgen("render", "--target", "trainjob", "--set", "trainjob.own_runtime=true",
                    "--set", "persistence.enabled=true", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.glob("*.yaml")) == [
        "0-persistentvolumeclaim-jax-training-outputs.yaml", "0-trainingruntime-jax-training.yaml",
        "networkpolicy-jax-training.yaml", "trainjob-jax-training.yaml"]


def _volumes(node) -> list[dict]:
    """Every pod spec's volumes anywhere in a document."""
    if isinstance(node, dict):
        found = list(node["volumes"]) if isinstance(node.get("volumes"), list) else []
        return found + [v for value in node.values() for v in _volumes(value)]
    if isinstance(node, list):
        return [v for item in node for v in _volumes(item)]
    return []


@pytest.mark.parametrize("target", [name for name in NAMES if name not in KUBERNETES])
def test_a_target_without_pods_has_no_emptydir_warning(target):
    host_dirs = ["--set", "data.dir=/shared/mnist", "--set", "checkpoint.dir=/shared/runs"]  # slurm's must be named
    result = jaxgen("render", "--target", target, *host_dirs)
    assert result.exit_code == 0 and result.stderr == "", result.stderr


def test_results_of_a_run_that_did_not_finish_or_of_no_run(tmp_path):
    run = tmp_path / "runs" / "job"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "metrics.jsonl").write_text('{"event": "start", "step": 0, "time": 1}\n'
                                       '{"event": "step", "epoch": 1, "step": 40, "loss": 0.5, "time": 2}\n')
    unfinished = jaxgen("results", str(tmp_path / "runs"))
    assert unfinished.exit_code == 1
    assert unfinished.stdout == f"{run}: the run did not finish (summary.json is missing; its last record is step 40)\n"
    missing = jaxgen("results", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and missing.stderr == f"error: {tmp_path / 'nowhere'}: no such directory\n"
    (tmp_path / "runs" / "other").mkdir()
    (tmp_path / "runs" / "other" / "run.json").write_text("{}")
    two = jaxgen("results", str(tmp_path / "runs"))
    assert two.exit_code == 2 and "2 job outputs directories" in two.stderr and "name one of them" in two.stderr


def test_results_of_a_run_stopped_before_its_first_step(tmp_path):
    """Nothing to plot is not an error: a run stopped at once is reported as not finished."""
    run = tmp_path / "job"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "metrics.jsonl").write_text('{"event": "start", "step": 0, "time": 1}\n')
    result = jaxgen("results", str(run))
    assert result.exit_code == 1 and result.stderr == "" and not (run / "curves.png").exists()
    assert result.stdout == f"{run}: the run did not finish (summary.json is missing; it recorded no step)\n"


HUGE = {
    "long-string": {"node_selector": {"k": "v" * 100_000}},
    "long-list": {"program": {"command": ["x"] * 100_000}},
    "long-key": {"x" * 100_000: 1},
    "long-label-key": {"labels": {"k" * 100_000: "v"}},
    "long-enum": {"accelerator": "t" * 100_000},
    "long-number-list": {"training": {"mlp": {"hidden_sizes": list(range(1, 100_001))}}},
}


@pytest.mark.parametrize("case", HUGE)
def test_errors_quote_huge_input_in_bounded_lines(case):
    result = jaxgen("validate", "-", stdin=json.dumps(HUGE[case]))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) <= 22, result.stderr[:2000]  # the heading, 20 problems and how many more
    assert max(len(line) for line in lines) <= 800, result.stderr[:2000]


def test_a_number_that_set_keeps_a_string_names_set_json():
    """Helm's --set types integers only (tests/chart/test_helm_reading.py holds jaxgen to its reading):
    0.05 stays a string there and here, and the error says how to give the number."""
    result = jaxgen("render", "--set", "training.learning_rate=0.05")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1] == (
        '  $.training.learning_rate: "0.05" is not of type number; --set keeps 0.05 a string, as Helm does: '
        "use --set-json training.learning_rate=0.05, or write it unquoted in a variables file")
    fixed = jaxgen("render", "--set-json", "training.learning_rate=0.05")
    assert fixed.exit_code == 0 and "- --learning-rate\n        - \"0.05\"" in fixed.stdout


@pytest.mark.parametrize("key,text", [("training.learning_rate", t) for t in ("0.05", "010", ".5", "5.", "2.50", " 1")]
                         + [("training.epochs", t) for t in ("3.0", "1e3", "010")])
def test_the_set_json_that_a_refusal_of_set_suggests_works(key, text):
    """The suggested --set-json is the number as JSON writes it: 010, .5 and 3.0 as given were no JSON
    number (or no integer), so the command the hint named failed in turn."""
    import shlex

    result = jaxgen("render", "--set", f"{key}={text}")
    assert result.exit_code == 2
    [line] = [line for line in result.stderr.splitlines() if "use --set-json " in line]
    [suggested] = shlex.split(line.split("use --set-json ", 1)[1].split(", or write it unquoted", 1)[0])
    fixed = jaxgen("render", "--set-json", suggested)
    assert fixed.exit_code == 0, fixed.stderr


@pytest.mark.parametrize("key,text,said", [("training.learning_rate", "1e3", "as a number 1000 is greater than "
                                                                               "the maximum of 10"),
                                           ("training.epochs", "1.5", "as a number 1.5 is not of type integer")])
def test_a_number_that_would_be_refused_as_a_number_too_gets_no_set_json(key, text, said):
    result = jaxgen("render", "--set", f"{key}={text}")
    assert result.exit_code == 2 and "--set-json" not in result.stderr
    assert result.stderr.splitlines()[1].endswith(f"--set keeps {text} a string, as Helm does, and {said}")


def test_a_set_key_escapes_what_a_set_line_reads_as_syntax():
    from generator.checks import _set_key
    from generator.set_values import parse_into

    key = _set_key(["resources", "limits", "example.com/x,y=z[0]", 1])
    assert key == r"resources.limits.example\.com/x\,y\=z\[0\][1]"
    assert parse_into(f"{key}=2", {}, "json") == {"resources": {"limits": {"example.com/x,y=z[0]": [None, 2]}}}


def test_a_renamed_key_names_its_new_name():
    result = jaxgen("render", "--set", "training.hidden_sizes={32}")
    assert result.exit_code == 2
    assert "  $.training.hidden_sizes: unknown key; it was renamed: use training.mlp.hidden_sizes" in result.stderr
    assert jaxgen("render", "--set", "training.mlp.hidden_sizes={32}").exit_code == 0



@pytest.mark.parametrize("index,said", [("9" * 5000, "is out of range"), ("-" + "9" * 5000, "is out of range"),
                                        ("0" * 5000 + "1", '$.labels.a: [null, "x"] is not of type string')])
def test_a_set_list_index_of_thousands_of_digits_is_one_problem(index, said):
    """int() refuses a number past 4300 digits (leading zeros count): such a --set list index ended in a
    ValueError traceback; a long index is now out of range, and a run of zeros still reads as its number."""
    result = jaxgen("render", "--set", f"labels.a[{index}]=x")
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert said in result.stderr.strip().splitlines()[-1], result.stderr[-2000:]
