# shellcheck shell=bash disable=SC2034
# Versions of the test control plane's binaries, read from the wrapper modules' go.mod (the single
# place they are pinned): etcd's own, kube-router's own, and the control-plane module's for everything else.
_cluster_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_modversion() { awk -v m="$2" '$1 == "require" && $2 == m { print $3 } $1 == m && $2 ~ /^v/ { print $2 }' "$1" | head -n1; }
_controlplane="$_cluster_dir/controlplane/go.mod"
K8S_VERSION="$(_modversion "$_controlplane" k8s.io/kubernetes)"
ETCD_VERSION="$(_modversion "$_cluster_dir/etcd/go.mod" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(_modversion "$_controlplane" sigs.k8s.io/kwok)"
COREDNS_VERSION="$(_modversion "$_controlplane" github.com/coredns/coredns)"
JOBSET_VERSION="$(_modversion "$_controlplane" sigs.k8s.io/jobset)"
TRAINING_OPERATOR_VERSION="$(_modversion "$_controlplane" github.com/kubeflow/training-operator)"
TRAINER_VERSION="$(_modversion "$_controlplane" github.com/kubeflow/trainer/v2)"
KUEUE_VERSION="$(_modversion "$_controlplane" sigs.k8s.io/kueue)"
KUBE_ROUTER_VERSION="$(_modversion "$_cluster_dir/kube-router/go.mod" github.com/cloudnativelabs/kube-router/v2)"
# Where the training-operator reads its webhook serving certs (hard-coded upstream; Kubeflow
# Trainer's status server reads the same path, given files of its own by up.sh).
TRAINING_OPERATOR_CERT_DIR=/tmp/k8s-webhook-server/serving-certs
# Where a controller reads its pod's service-account token and namespace (hard-coded upstream).
SERVICE_ACCOUNT_DIR=/var/run/secrets/kubernetes.io/serviceaccount
# Kubeflow Trainer's status server, as its runtime points the pods at it:
# https://<service>.<namespace>.svc:<port> (its certManagement.webhookServiceName, and the namespace
# it runs in).
TRAINER_SERVICE=kubeflow-trainer-controller-manager
TRAINER_NAMESPACE=kubeflow-system
# Where Kueue reads its metrics serving cert when it does not manage its certs (hard-coded upstream).
KUEUE_METRICS_CERT_DIR=/etc/kueue/metrics/certs
