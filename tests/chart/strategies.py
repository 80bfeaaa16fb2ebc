"""Valid variables aimed at the places where a Go template and a Jinja template could disagree."""

from __future__ import annotations

from hypothesis import strategies as st

from generator.engines.kubernetes.policy import DNS_LABEL_MAX
from generator.targets import KUBERNETES, target as target_of
from tests.support.strategies import choices, dns_name, label_key
from trainer.contract import MAX_GPUS_PER_HOST

# Printable text PyYAML accepts in a stream (its reader refuses other code points, whichever engine
# produced them), with the characters that break naive templating over-represented.
PRINTABLE = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Co", "Cn"))
NASTY = st.sampled_from(['"', "'", "\\", "{{", "}}", "{{ .Values.name }}", "$(X)", ": ", " #", "- ", "\n",
                         "\t", "&a", "*a", "!!str", "%", "@", "`", "~", "null", "true", "0x1F", "1e3", "<>&"])
TEXT = st.lists(st.one_of(NASTY, st.text(alphabet=PRINTABLE, max_size=8)), max_size=6).map("".join)

# Numbers of "number" fields: ints, integral floats and tiny ones read differently by naive code.
LEARNING_RATES = st.one_of(st.sampled_from([1, 2, 10, 1.0, 10.0, 0.5, 1e-05, 1.5e-07, 0.0001, 0.1 + 0.2]),
                           st.floats(min_value=1e-9, max_value=10, allow_nan=False, allow_infinity=False))
MOMENTA = st.one_of(st.sampled_from([0, 0.0, 0.9, 0.99, 0.999999]),
                    st.floats(min_value=0, max_value=0.999999, allow_nan=False, allow_infinity=False))
VOLUMES = st.sampled_from([{}, {"persistentVolumeClaim": {"claimName": "vol"}},
                           {"hostPath": {"path": "/srv/x"}}, {"emptyDir": {"medium": "Memory"}},
                           {"configMap": {"name": "cm", "defaultMode": 420}}])
DIRS = st.sampled_from(["/data/mnist", "/d", "/mnt/a b/ü", "/x/", "/data/mnist//", "/ckpt:1"])


@st.composite
def chart_variables(draw) -> dict:
    target = draw(st.sampled_from(KUBERNETES))
    hosts = draw(st.one_of(st.integers(1, 4), st.sampled_from([16, 100, 1024, 4096])))
    local = draw(st.sampled_from([n for n in (1, 2, 4, 8, 16) if hosts * n <= 60000]))  # a batch fits MNIST
    accelerator = draw(st.sampled_from(choices("accelerator")))
    devices = hosts * local
    model = draw(st.sampled_from([m for m in (1, 2, 4, 8) if local % m == 0]))  # within one host
    suffix = target_of(target).workload.hosts.host("", hosts - 1)
    data_dir, checkpoint_dir = draw(st.lists(DIRS, min_size=2, max_size=2, unique_by=lambda d: d.rstrip("/")))
    data_volume = draw(VOLUMES)
    values = {
        "name": draw(dns_name(max_size=DNS_LABEL_MAX - len(suffix))),
        "target": target,
        "hosts_count": hosts,
        "local_device_count": local,
        "accelerator": accelerator,
        "training": {
            "batch_size": devices * draw(st.integers(1, max(1, min(64, 60000 // devices)))),
            "learning_rate": draw(LEARNING_RATES),
            "momentum": draw(MOMENTA),
            "strategy": "sharded" if model > 1 else draw(st.sampled_from(choices("training.strategy"))),
            "model_parallelism": model,
            "precision": draw(st.sampled_from(choices("training.precision"))),
        },
        "data": {"dir": data_dir, "volume": data_volume,
                 "download": draw(st.booleans()) if data_volume else True},
        "checkpoint": {"dir": checkpoint_dir, "volume": draw(VOLUMES)},
        "annotations": draw(st.dictionaries(label_key, TEXT, max_size=3)),
        "env": draw(st.lists(st.builds(lambda n, v: {"name": n, "value": v},
                                       st.from_regex(r"\A[A-Za-z_.-][A-Za-z0-9_.-]{0,8}\Z"), TEXT),
                             max_size=3, unique_by=lambda e: e["name"])),
        "ttl_seconds_after_finished": draw(st.one_of(st.none(), st.integers(0, 31536000))),
        "active_deadline_seconds": draw(st.one_of(st.none(), st.integers(1, 31536000))),
        "backoff_limit": draw(st.integers(0, 100)),
    }
    if accelerator == "gpu" and local <= MAX_GPUS_PER_HOST and draw(st.booleans()):
        section = draw(st.sampled_from(["limits", "requests"]))
        values["resources"] = {section: {"nvidia.com/gpu": draw(st.sampled_from([local, str(local)]))}}
    if draw(st.booleans()):
        values["trainjob"] = {"runtime": draw(st.sampled_from(["jax-distributed", "my.runtime"])),
                              "runtime_kind": draw(st.sampled_from(["ClusterTrainingRuntime", "TrainingRuntime"]))}
    if draw(st.booleans()):
        values["program"] = {"command": draw(st.sampled_from([[], ["python", "/app/my train.py"], ["./run"]])),
                             "args": draw(st.lists(st.sampled_from(["--x", "1e3", "y", "a b", "#c"]), max_size=3))}
    if draw(st.booleans()):
        values["jobset"] = {"max_restarts": draw(st.integers(0, 100)),
                            "exclusive_topology": draw(st.sampled_from(["", "kubernetes.io/hostname"]))}
    return values
