"""Hand-picked values files for the parity matrix: every target, cpu and gpu, one and many hosts,
and every optional block switched on (the base cases leave each one off, at its default)."""

from __future__ import annotations

from generator.engines.kubernetes.policy import DNS_LABEL_MAX
from generator.targets import KUBERNETES as TARGETS, TARGETS as TARGET_ROWS
from trainer import models

TRICKY_TEXT = 'quote " back\\slash {{ .Values.name }} $(HOME) #not-a-comment: - [x] ü 日本 \ttab\nnewline'

PVC = {"persistentVolumeClaim": {"claimName": "mnist", "readOnly": True}}
NODE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}}
POD_ANTI_AFFINITY = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "jax-training"}}}}]}}


BASE_KEYS = ("name", "target", "accelerator", "hosts_count", "local_device_count", "training")


def _base_cases() -> dict[str, dict]:
    cases = {}
    for target in TARGETS:
        for accelerator in ("cpu", "gpu"):
            for hosts, local in ((1, 1), (4, 2)):
                if accelerator == "gpu" and hosts > 1:
                    local = 8
                cases[f"{target}-{accelerator}-{hosts}x{local}"] = {
                    "name": f"p-{target}-{accelerator}-{hosts}",
                    "target": target, "accelerator": accelerator,
                    "hosts_count": hosts, "local_device_count": local,
                    "training": {"batch_size": 256},
                }
    return cases


# One optional block on per case, rotating over the targets; values merge over the defaults.
OPTIONAL_BLOCKS: dict[str, dict] = {
    "labels-annotations": {"labels": {"team": "ml", "cost-center.example.com/id": "42"},
                           "annotations": {"example.com/note": TRICKY_TEXT, "empty": ""}},
    "user-labels-cannot-override-selectors": {"labels": {"app.kubernetes.io/name": "other",
                                                         "app.kubernetes.io/instance": "other",
                                                         "app.kubernetes.io/component": "other"}},
    "queue-name": {"queue_name": "team-queue"},
    "env": {"env": [{"name": "TRICKY", "value": TRICKY_TEXT},
                    {"name": "EMPTY", "value": ""},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
    # names beside the trainer's internal ones (trainer/contract.py INTERNAL_ENV), which only they reserve
    "env-beside-internal": {"env": [{"name": "JAX_TRAINING_ATTEMPTS", "value": "1"},
                                    {"name": "jax_training_attempt", "value": "1"},
                                    {"name": "JAX_TRAINING", "value": "1"}, {"name": "JAXT_CACHE", "value": "/c"}]},
    "image": {"image": {"repository": "registry.example.com:5000/ml/trainer", "tag": "1.2.3-cuda12_x",
                        "pull_policy": "Always", "pull_secrets": ["regcred", "other.creds"]}},
    "image-digest": {"image": {"repository": "localhost:5000/ml/trainer", "tag": "latest", "digest": "sha256:" + "0f" * 32}},
    "image-latest": {"image": {"tag": "latest"}},
    "node-selector": {"node_selector": {"kubernetes.io/arch": "amd64", "example.com/pool": "train"}},
    "node-affinity": {"affinity": NODE_AFFINITY},
    "pod-anti-affinity": {"affinity": POD_ANTI_AFFINITY},
    "tolerations": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
                                    {"key": "spot", "operator": "Exists", "effect": "NoExecute",
                                     "tolerationSeconds": 300}]},
    "gpu-tolerations-merge": {"accelerator": "gpu", "local_device_count": 2,
                              "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
    "node-lost-seconds": {"target": "trainjob", "failure": {"node_lost_seconds": 5}},
    "node-lost-zero": {"target": "jaxjob", "failure": {"node_lost_seconds": 0}},
    # A toleration of the user's for a lost node's taint with NoExecute or no effect replaces ours;
    # one with another effect does not.
    "node-lost-user-tolerations-win": {"target": "indexed-job", "failure": {"node_lost_seconds": 10}, "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}]},
    "node-lost-user-seconds-win": {"target": "jobset", "accelerator": "gpu", "local_device_count": 1, "tolerations": [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}]},
    "gpu-explicit-limit": {"accelerator": "gpu", "local_device_count": 4,
                           "resources": {"limits": {"nvidia.com/gpu": 4, "cpu": "16"}}},
    "requests-at-their-limits": {"resources": {"requests": {"cpu": "1500m", "memory": "4096Mi"},
                                               "limits": {"cpu": "1.5", "memory": "4Gi"}}},
    "resources-override": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi"},
                                         "limits": {"memory": "1536Mi", "cpu": 2}}},
    "data-volume-no-download": {"data": {"download": False, "volume": PVC, "dir": "/mnt/mnist"}},
    "data-host-path": {"data": {"volume": {"hostPath": {"path": "/srv/mnist", "type": "Directory"}}}},
    "checkpoint-volume": {"checkpoint": {"dir": "/ckpt/run 1/ü", "every_steps": 0,
                                         "volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}}},
    "checkpoint-emptydir-sized": {"checkpoint": {"volume": {"emptyDir": {"sizeLimit": "5Gi"}}}},
    "persistence-indexed-job": {"target": "indexed-job", "persistence": {
        "enabled": True, "size": "20Gi", "storage_class": "fast-ssd", "access_mode": "ReadWriteMany",
        "annotations": {"example.com/backup": "daily"}}, "annotations": {"example.com/note": "all"}},
    "persistence-static-pv-jobset": {"target": "jobset", "persistence": {"enabled": True, "storage_class": "-"}},
    "persistence-existing-claim-jaxjob": {"target": "jaxjob", "persistence": {"existing_claim": "team.results"}},
    "persistence-trainjob-own-runtime": {"target": "trainjob", "trainjob": {"own_runtime": True},
                                         "persistence": {"enabled": True}},
    "persistence-one-pod": {"hosts_count": 1, "persistence": {"enabled": True, "access_mode": "ReadWriteOncePod"}},
    "outputs-bucket-jobset": {"target": "jobset", "outputs": {"uri": "s3://team-results/runs", "secret": "s3.creds",
                                                             "endpoint": "http://minio.storage:9000"}},
    "outputs-bucket-trainjob": {"target": "trainjob", "outputs": {"uri": "s3://team-results", "secret": "s3-creds"},
                                "env": [{"name": "AWS_REGION", "value": "eu-west-1"}]},
    "outputs-bucket-no-secret": {"target": "jaxjob", "outputs": {"uri": "s3://team-results/a/b/"}},
    # where the outputs are, as both renderers record it, from a prefix and a folder with extra slashes
    "outputs-bucket-slashes": {"target": "indexed-job", "outputs": {"uri": "s3://team-results//a//b//"},
                               "checkpoint": {"dir": "/ckpt//runs/"}},
    "service-account": {"service_account_name": "trainer.sa"},
    "priority-class": {"priority_class_name": "high-priority"},
    "ttl-null": {"ttl_seconds_after_finished": None},
    "ttl-zero-deadline": {"ttl_seconds_after_finished": 0, "active_deadline_seconds": 7200},
    "backoff": {"backoff_limit": 3},
    "trainjob-own-runtime": {"target": "trainjob", "trainjob": {"own_runtime": True}, "jobset": {"max_restarts": 2},
                             "annotations": {"example.com/note": "runtime"}},
    "trainjob-namespaced-runtime": {"target": "trainjob", "trainjob": {"runtime": "my-jax", "runtime_kind": "TrainingRuntime"}},
    "jobset-placement": {"target": "jobset", "jobset": {"max_restarts": 4,
                                                        "exclusive_topology": "cloud.google.com/gke-nodepool"}},
    "long-image-tag": {"image": {"tag": "_v1." + "a1-" * 40 + "x."}},  # the version label is cut and trimmed
    "sharded-model-axis": {"hosts_count": 2, "local_device_count": 4,
                           "training": {"strategy": "sharded", "model_parallelism": 4, "batch_size": 64}},
    "adam-integral-floats": {"training": {"optimizer": "adamw", "learning_rate": 1.0, "momentum": 0.0}},
    "integer-learning-rate": {"training": {"learning_rate": 2, "momentum": 0}},
    "tiny-learning-rate": {"training": {"learning_rate": 1.5e-05, "momentum": 0.999999}},
    "big-integers": {"training": {"seed": 2147483647, "epochs": 10000, "batch_size": 60000},
                     "checkpoint": {"every_steps": 100000000}},
    "ports-timeouts": {"coordinator_port": 65535, "init_timeout_seconds": 86400, "heartbeat_timeout_seconds": 5},
    "namespace-mirror": {"namespace": "ml-team-1", "data": {"mirror": "file:///srv/mirror/mnist/"}},
    "shm-size": {"accelerator": "gpu", "local_device_count": 1, "shm_size": "16Gi"},
    "slurm-block-ignored": {"slurm": {"partition": "gpu", "nodes": 1, "modules": ["cuda/12"]}},
    "trainer-extra-args": {"program": {"args": ["--cpu-threads", "1", "--log-every", "7"]}},
    "metrics-off": {"metrics": {"port": 0}},
    "metrics-user-annotations-win": {"metrics": {"port": 9100},
                                     "annotations": {"prometheus.io/scrape": "false", "prometheus.io/path": "/x"}},
    "metrics-pod-monitor-indexed-job": {"target": "indexed-job", "metrics": {"port": 9100, "pod_monitor": True}},
    "metrics-pod-monitor-jaxjob": {"target": "jaxjob", "metrics": {"pod_monitor": True}},
    "metrics-pod-monitor-jobset": {"target": "jobset", "metrics": {"pod_monitor": True}},
    "metrics-pod-monitor-trainjob-own-runtime": {"target": "trainjob", "trainjob": {"own_runtime": True},
                                                 "metrics": {"pod_monitor": True}},
    "metrics-off-trainjob-own-runtime": {"target": "trainjob", "trainjob": {"own_runtime": True},
                                         "metrics": {"port": 0}},
    "network-policy-off": {"target": "jobset", "network_policy": {"enabled": False}},
    "network-policy-restricted": {"target": "trainjob", "network_policy": {
        "metrics_from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                          "podSelector": {"matchLabels": {"app": "prometheus"}}}, {"ipBlock": {"cidr": "10.0.0.0/8"}}],
        "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}],
                    "ports": [{"port": 443, "protocol": "TCP"}, {"port": "https"}]}]}},
    "network-policy-no-egress": {"target": "jaxjob", "network_policy": {"metrics_from": [], "egress": []}},
    "every-training-variable": {"training": {"lr_schedule": "constant", "train_examples": 4096, "log_every": 10,
                                             "steps_per_dispatch": 5, "allreduce_dtype": "bfloat16"}},
    **{f"kueue-{target}": {"target": target, "queue_name": "team-queue", "annotations": {"example.com/note": "kept"},
                           "kueue": {"priority_class": "high.example", "topology": "cloud.example.com/rack",
                                     "topology_mode": mode}}
       for target, mode in zip(TARGETS, ("required", "preferred") * len(TARGETS))},
    "kueue-jaxjob-integration": {"target": "jaxjob", "queue_name": "q",
                                 "kueue": {"jaxjob_integration": True, "topology": "rack"}},
    "kueue-settings-without-queue": {"kueue": {"priority_class": "low", "topology": "rack"}},
}

# The longest names each target allows with 10 hosts (pod hostnames stay within 63 characters; the
# JobSet webhook counts the pod name's random suffix).
LONGEST_NAMES = {target: DNS_LABEL_MAX - len(hosts.host("", 9) + hosts.pod_name_suffix)
                 for target, hosts in ((target, TARGET_ROWS[target].workload.hosts) for target in TARGETS)}


def _optional_cases() -> dict[str, dict]:
    cases = {}
    for i, (block, overrides) in enumerate(OPTIONAL_BLOCKS.items()):
        target = overrides.get("target", TARGETS[i % len(TARGETS)])
        cases[f"{block}-{target}"] = {"name": f"opt-{i}", "target": target, **overrides}
    for i, name in enumerate(models.NAMES):  # every model, its settings changed, with a model axis
        settings = {s.name: [2 * v for v in s.default] if s.is_list else s.default for s in models.get(name).settings}
        cases[f"model-{name}"] = {"name": f"model-{i}", "target": TARGETS[i % len(TARGETS)], "hosts_count": 2,
                                  "local_device_count": 2, "training": {"model": name, "strategy": "sharded",
                                                                        "model_parallelism": 2, name: settings}}
    for target, length in LONGEST_NAMES.items():
        cases[f"longest-name-{target}"] = {"name": "n" * length, "target": target, "hosts_count": 10,
                                           "training": {"batch_size": 10}}
    return cases


def _everything_on() -> dict[str, dict]:
    merged: dict = {}
    for key in ("kueue-jobset", "labels-annotations", "queue-name", "env", "image", "node-selector", "node-affinity",
                "tolerations", "data-volume-no-download", "checkpoint-volume", "service-account",
                "priority-class", "ttl-zero-deadline", "backoff", "ports-timeouts", "namespace-mirror"):
        merged.update(OPTIONAL_BLOCKS[key])
    cases = {}
    for target in TARGETS:
        for accelerator in ("cpu", "gpu"):
            cases[f"everything-{target}-{accelerator}"] = {
                **merged, "name": f"all-{target}", "target": target, "accelerator": accelerator,
                "hosts_count": 3, "local_device_count": 2, "training": {"batch_size": 96},
                "jobset": {"max_restarts": 1, "exclusive_topology": "kubernetes.io/hostname"}}
    return cases


CASES: dict[str, dict] = {**_base_cases(), **_optional_cases(), **_everything_on()}
