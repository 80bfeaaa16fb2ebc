# Generated from generator/engines/kubernetes/policy.py by `make generate`; do not edit.
# shellcheck shell=bash disable=SC2034
RUN_AS_ID=10000
# The label of a job queued to Kueue (run.sh says such a job is queued, not suspended).
QUEUE_LABEL=kueue.x-k8s.io/queue-name
# The selector of every object and pod of release $1.
release_selector() { echo "app.kubernetes.io/name=jax-training,app.kubernetes.io/instance=$1"; }
