"""Hypothesis strategies for valid variables files (shared by the generator and chart tiers)."""

from __future__ import annotations

from hypothesis import strategies as st

from generator.checks import schema
from generator.targets import KUBERNETES


def choices(path: str) -> list:
    """The values the schema allows at a dotted variables path (its enum), e.g. training.optimizer."""
    node = schema()
    for key in path.split("."):
        node = node["properties"][key]
    return node["enum"]


# The metrics port's default: a coordinator on it is refused (both listen in the pod).
METRICS_PORT = schema()["properties"]["metrics"]["properties"]["port"]["default"]
DNS_LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-"
# Strings YAML readers disagree on when written bare (YAML 1.1, 1.2, go-yaml), or that need escapes.
YAML_LOOKALIKES = ("3e-05", "1e3", "y", "n", "Y", "N", "yes", "No", "on", "OFF", "true", "False", "null", "~",
                   "", "0o17", "0x1F", "0b101", "1_000", "012", "+1", "-1", "1.0", ".5", "1:20", "2001-12-14",
                   ".inf", "-.inf", ".nan", "<<", "=", "---", "...", "- x", "a: b", "a:", "#x", "x #y", " x",
                   "x ", "@x", "`x", "|", ">", "!x", "&x", "*x", "%x", "[x]", "{x}", "'x'", '"x"', "\\", "\n",
                   "\t", "\x85", "\u2028", "\u2029", "\ufeff", "\x7f", "\x00", "\U0001F600", "a\U0001F600b")
SAFE_TEXT = st.one_of(st.sampled_from(YAML_LOOKALIKES),
                      st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))


@st.composite
def dns_name(draw, max_size: int = 30) -> str:
    body = draw(st.text(alphabet=DNS_LABEL_CHARS, min_size=0, max_size=max_size - 2))
    return draw(st.sampled_from("abcxyz")) + body.strip("-") + draw(st.sampled_from("abc0"))


label_value = st.one_of(st.sampled_from(("y", "n", "Y", "N", "on", "No", "1e3", "0o17", "0x1F", "012", "1.0")),
                        st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?\Z"))
label_key = st.one_of(st.sampled_from(("y", "n", "on", "off", "yes", "no", "true", "null")),
                      st.from_regex(r"\A([a-z0-9]{1,10}\.example/)?[a-z][a-z0-9]{0,15}\Z"))


@st.composite
def variables(draw, targets=KUBERNETES) -> dict:
    """A valid variables file: only some keys set, the rest left to the defaults."""
    hosts = draw(st.integers(1, 8))
    local = draw(st.integers(1, 4))
    accelerator = draw(st.sampled_from(choices("accelerator")))
    devices = hosts * local
    strategy = draw(st.sampled_from(choices("training.strategy")))
    model = 1
    if strategy == "sharded":
        model = draw(st.sampled_from([m for m in (1, 2, 4) if local % m == 0]))  # the axis stays within one host
    values: dict = {
        "name": draw(dns_name(max_size=40)),
        "target": draw(st.sampled_from(targets)),
        "hosts_count": hosts,
        "local_device_count": local,
        "accelerator": accelerator,
        "training": {
            "batch_size": devices * draw(st.integers(1, 64)),
            "strategy": strategy,
            "model_parallelism": model,
            "epochs": draw(st.integers(1, 100)),
            "learning_rate": draw(st.sampled_from([0.1, 0.01, 0.001, 3e-05, 1e-05, 0.5, 2])),
            "optimizer": draw(st.sampled_from(choices("training.optimizer"))),
            "seed": draw(st.integers(0, 2**31 - 1)),
            "precision": draw(st.sampled_from(choices("training.precision"))),
        },
    }
    optional = {
        "namespace": dns_name(max_size=20),
        "coordinator_port": st.integers(1024, 65535).filter(lambda port: port != METRICS_PORT),
        "labels": st.dictionaries(label_key, label_value, max_size=3),
        "annotations": st.dictionaries(label_key, SAFE_TEXT, max_size=3),
        "env": st.lists(st.builds(lambda n, v: {"name": n, "value": v},
                                  st.from_regex(r"\A[A-Z][A-Z0-9_]{0,10}\Z"), SAFE_TEXT),
                        max_size=3, unique_by=lambda e: e["name"]),
        "node_selector": st.dictionaries(label_key, label_value, max_size=2),
        "tolerations": st.lists(st.fixed_dictionaries({"key": label_key, "operator": st.just("Exists"),
                                                       "effect": st.sampled_from(["NoSchedule", "NoExecute"])}),
                                max_size=2),
        "backoff_limit": st.integers(0, 5),
        "kube_version": st.sampled_from(["", "1.31.0", "1.34", "1.35.0", "v1.36.3-gke.1", "1.37.0"]),
        "ttl_seconds_after_finished": st.one_of(st.none(), st.integers(0, 10**6)),
        "active_deadline_seconds": st.one_of(st.none(), st.integers(1, 10**6)),
        "queue_name": st.one_of(st.just(""), dns_name(max_size=20)),
        "service_account_name": st.one_of(st.just(""), dns_name(max_size=20)),
        "priority_class_name": st.one_of(st.just(""), dns_name(max_size=20)),
        "shm_size": st.sampled_from(["1Gi", "512Mi", "16Gi"]),
        "image": st.fixed_dictionaries({
            "tag": st.one_of(st.sampled_from(("1e3", "3e-05", "y", "N", "0o17", "1_000", "1.0", "012", "latest")),
                             st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,10}\Z")),
            "digest": st.one_of(st.just(""), st.from_regex(r"\Asha256:[0-9a-f]{64}\Z")),
            "pull_policy": st.sampled_from(["", "Always", "IfNotPresent", "Never"]),
            "pull_secrets": st.lists(dns_name(max_size=15), max_size=2, unique=True)}),
        "data": st.fixed_dictionaries({"download": st.just(True),
                                       "dir": st.sampled_from(["/data/mnist", "/mnt/data set/ü"])},
                                      optional={"volume": st.sampled_from(
                                          [{}, {"persistentVolumeClaim": {"claimName": "mnist"}}])}),
        "checkpoint": st.fixed_dictionaries({"every_steps": st.integers(0, 1000)},
                                            optional={"volume": st.sampled_from(
                                                [{}, {"persistentVolumeClaim": {"claimName": "ckpt"}}])}),
        "resources": st.sampled_from([{}, {"requests": {"cpu": "2", "memory": "1Gi"}},
                                      {"limits": {"memory": "8Gi"}}]),
        "jobset": st.fixed_dictionaries({"max_restarts": st.integers(0, 5),
                                         "exclusive_topology": st.sampled_from(["", "kubernetes.io/hostname"])}),
        "affinity": st.sampled_from([{}, {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}]),
    }
    for key, strategy_ in optional.items():
        if draw(st.booleans()):
            values[key] = draw(strategy_)
    return values
