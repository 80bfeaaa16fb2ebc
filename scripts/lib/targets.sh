# Generated from generator/targets.py by `make generate`; do not edit.
# shellcheck shell=bash disable=SC2034
CLEANUP_RESOURCES=(trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org jaxjobs.kubeflow.org jobsets.jobset.x-k8s.io jobs.batch services pods)
