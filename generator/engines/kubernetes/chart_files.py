"""The chart's and the scripts' copies of the Kubernetes facts (policy.py) and of the trainer's that the
pods carry: charts/jax-training/files/contract.json and scripts/lib/contract.sh, written by
`make generate` (scripts/generate.py)."""

from __future__ import annotations

import json

from trainer import cluster, contract
from trainer.fencing import ATTEMPT_ENV
from trainer.rejoin import POD_UID_ENV
from trainer.supervisor import PEER_LOST_WAIT_ENV

from ... import images, shipping, targets
from . import kueue, policy
from .policy import (ANNOTATIONS_MAX_BYTES, BUCKET_CREDENTIALS_ENV, CHECKPOINTS_VOLUME, CHILD_JOB_FAILURE_RULES,
                     COMPLETION_INDEX_FIELD, DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, GPU_RESOURCE, HUGE_PAGES_PREFIX,
                     IN_PLACE_RESTART, INSTANCE_LABEL, JOBSET_FAILURE_RULES, METRICS_PORT_NAME, NAME_LABEL,
                     NATIVE_RESOURCE_DOMAIN, NODE_LOST_EFFECT, NODE_LOST_TAINTS, OUTPUTS_DIR_ANNOTATION,
                     OUTPUTS_URI_ANNOTATION, POD_FAILURE_RULES, PROJECT_SELECTOR, QUANTITY_SUFFIXES, RENDERED_ENV,
                     RUN_AS_ID, STANDARD_RESOURCES, UNBUFFERED_ENV)


def chart_json() -> str:
    """charts/jax-training/files/contract.json: the facts the chart's templates read, this module's and
    the trainer's (trainer/contract.py) that the pods carry."""
    facts = {
        "completionIndexField": COMPLETION_INDEX_FIELD,
        "dnsLabelMax": DNS_LABEL_MAX,
        "coordinatorServiceAnnotations": policy.COORDINATOR_SERVICE_ANNOTATIONS,
        "dnsSubdomainMax": DNS_SUBDOMAIN_MAX,
        "annotationsMaxBytes": ANNOTATIONS_MAX_BYTES,
        "maxGpusPerHost": contract.MAX_GPUS_PER_HOST,
        "systemDirs": list(contract.SYSTEM_DIRS),
        "imageDirs": list(contract.IMAGE_DIRS),
        "imageRepositoryPattern": images.REPOSITORY_PATTERN,
        "defaultImageRepository": images.default_repository(),
        "helmArchivesLimit": shipping.HELM_ARCHIVES_LIMIT,
        "quantitySuffixes": QUANTITY_SUFFIXES,
        "standardResources": list(STANDARD_RESOURCES),
        "hugePagesPrefix": HUGE_PAGES_PREFIX,
        "nativeResourceDomain": NATIVE_RESOURCE_DOMAIN,
        "runAsId": RUN_AS_ID,
        "processEnv": list(contract.PROCESS_ENV),
        "internalEnv": list(contract.INTERNAL_ENV),
        "renderedEnv": list(RENDERED_ENV),
        "unbufferedEnv": UNBUFFERED_ENV,
        "bucketCredentialsEnv": list(BUCKET_CREDENTIALS_ENV),
        "outputFlags": contract.OUTPUT_FLAGS,
        "pathFlags": list(contract.PATH_FLAGS),
        "localDeviceCountEnv": cluster.LOCAL_DEVICE_COUNT_ENV,
        "attemptEnv": ATTEMPT_ENV,
        "peerLostWaitEnv": PEER_LOST_WAIT_ENV,
        "peerLostWaitSeconds": policy.PEER_LOST_WAIT_SECONDS,
        "jaxjobBackoffLimitFloor": policy.JAXJOB_BACKOFF_LIMIT_FLOOR,
        "podFailureRules": [{"action": action, "match": match} for action, match in POD_FAILURE_RULES],
        "inPlaceRestart": IN_PLACE_RESTART,
        "podUidEnv": POD_UID_ENV,
        "podUidField": policy.POD_UID_FIELD,
        "childJobFailureRules": [{"action": action, "match": match} for action, match in CHILD_JOB_FAILURE_RULES],
        "jobSetFailureRules": list(JOBSET_FAILURE_RULES),
        "metricsPortName": METRICS_PORT_NAME,
        "metricsPath": contract.METRICS_PATH,
        "gpuResource": GPU_RESOURCE,
        "nodeLostTaints": list(NODE_LOST_TAINTS),
        "nodeLostEffect": NODE_LOST_EFFECT,
        "checkpointsVolume": CHECKPOINTS_VOLUME,
        "outputsAnnotations": {"dir": OUTPUTS_DIR_ANNOTATION, "uri": OUTPUTS_URI_ANNOTATION},
        "nameLabel": NAME_LABEL,
        "instanceLabel": INSTANCE_LABEL,
        "queueLabel": kueue.QUEUE_LABEL,
        "priorityLabel": kueue.PRIORITY_LABEL,
        "topologyAnnotation": kueue.TOPOLOGY_ANNOTATION,
        # The targets of other engines: the chart refuses them (every other target has its row).
        "otherEngineTargets": [name for name in targets.NAMES if name not in targets.KUBERNETES],
    }
    return json.dumps(facts, indent=1) + "\n"


def shell_facts() -> str:
    """scripts/lib/contract.sh: the facts as the shell scripts source them."""
    return ("# Generated from generator/engines/kubernetes/policy.py by `make generate`; do not edit.\n"
            "# shellcheck shell=bash disable=SC2034\n"
            f"RUN_AS_ID={RUN_AS_ID}\n"
            "# The label of a job queued to Kueue (run.sh says such a job is queued, not suspended).\n"
            f"QUEUE_LABEL={kueue.QUEUE_LABEL}\n"
            "# The selector of every object and pod of release $1.\n"
            f'release_selector() {{ echo "{PROJECT_SELECTOR},{INSTANCE_LABEL}=$1"; }}\n')
