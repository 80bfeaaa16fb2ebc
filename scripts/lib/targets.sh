# Generated from generator/targets.py and generator/engines/kubernetes/kueue.py by `make generate`; do not edit.
# shellcheck shell=bash disable=SC2034
CLEANUP_RESOURCES=(trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org jobsets.jobset.x-k8s.io jaxjobs.kubeflow.org jobs.batch podmonitors.monitoring.coreos.com services networkpolicies.networking.k8s.io pods)
QUEUE_LABEL=kueue.x-k8s.io/queue-name
