#!/usr/bin/env bash
# Starts a local Kubernetes control plane for end-to-end tests: etcd, kube-apiserver (PodSecurity
# admission on), kube-controller-manager, kube-scheduler and either kwok (fake CPU and GPU nodes
# that drive pods through their lifecycle) or, with --real-node, one real node (node.sh:
# containerd, runc, bridge CNI, CoreDNS and a kubelet running real containers; with --real-nodes N,
# N of them on this host, each with its own containerd, kubelet, cgroup root, bridge and pod
# subnet; with --network-policy, NetworkPolicy enforced on them by kube-router's firewall), installs the CRDs of ../shared/crds and, unless --no-controllers, the JobSet controller, the Kubeflow training-operator
# (JAXJob), the Kubeflow Trainer v2 controller (TrainJob, with the jax-distributed
# ClusterTrainingRuntime of ../shared/crds) and Kueue (queueing of Jobs, JobSets and TrainJobs). Prints the KUBECONFIG path on stdout. Stop it with scripts/cluster/down.sh STATE_DIR.
set -Eeuo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/versions.sh"

usage() {
  cat <<EOF
Usage: scripts/cluster/up.sh [--state-dir DIR] [--namespace NS] [--no-controllers] [--real-node | --real-nodes N]
                             [--network-policy]
                             [--owner-pid PID] [--max-lifetime SECONDS] [--timeout SECONDS]
                             [--api-qps QPS] [--pods-ready-timeout SECONDS]

Builds the binaries if needed (scripts/cluster/build.sh), starts the control plane with its
state, logs and certificates under DIR (default: a new ${TMPDIR:-/tmp}/jaxt-cluster.XXXXXX),
waits until it is ready and prints the KUBECONFIG path. On any failure it prints the last log
lines, stops what it started and exits non-zero.

  --state-dir DIR         where state, certificates, logs and pid files go (created)
  --namespace NS          namespace created with PodSecurity enforce=restricted (default: jax-e2e)
  --no-controllers        do not start the JobSet controller, the training-operator, Trainer v2 and Kueue
                          (Kueue reads a certificate from /etc/kueue/metrics/certs: starting it needs root)
  --real-node             one real node (root; scripts/setup.sh node) instead of kwok's fake ones
  --real-nodes N          N real nodes on this host (1 to 8; --real-node is 1): each a kubelet with its
                          own containerd, root dir, cgroup root, bridge and pod subnet (node i:
                          10.200.<i-1>.0/24), pods reaching each other across them, one cluster DNS
  --network-policy        with real nodes: enforce NetworkPolicy on them with kube-router's firewall
                          (iptables and ipset; one kube-router for the host, whose nodes share its
                          network; scripts/cluster/network-policy.sh); without it a NetworkPolicy is
                          stored and ignored
  --owner-pid PID         stop the cluster as soon as process PID exits (e.g. the test runner)
  --max-lifetime SECONDS  stop the cluster after this long whatever happens (default: 3600)
  --timeout SECONDS       how long each component may take to become ready (default: 120)
  --api-qps QPS           API request rate of the controller-manager and the scheduler (burst 2 x QPS;
                          default: their own, 20 and 50): what bounds pod creation and binding of
                          jobs with hundreds of pods (benchmarks/kwok_scale.py)
  --pods-ready-timeout SECONDS
                          Kueue's waitForPodsReady timeout: an admitted job whose pods are not all
                          ready by then is evicted and requeued (default: 15 with kwok, 120 with
                          --real-node)
EOF
}

state="" namespace="jax-e2e" controllers=true real_node=false real_nodes=1 owner_pid="" max_lifetime=3600 timeout=120 api_qps=""
network_policy=false
pods_ready_timeout=""
while [ $# -gt 0 ]; do
  case "$1" in
    --state-dir) need_value "$@"; state="$2"; shift ;;
    --namespace) need_value "$@"; namespace="$2"; shift ;;
    --no-controllers) controllers=false ;;
    --real-node) real_node=true real_nodes=1 ;;
    --real-nodes) need_value "$@"; real_node=true real_nodes="$2"; shift ;;
    --network-policy) network_policy=true ;;
    --owner-pid) need_value "$@"; owner_pid="$2"; shift ;;
    --max-lifetime) need_value "$@"; max_lifetime="$2"; shift ;;
    --timeout) need_value "$@"; timeout="$2"; shift ;;
    --api-qps) need_value "$@"; api_qps="$2"; shift ;;
    --pods-ready-timeout) need_value "$@"; pods_ready_timeout="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; bad_usage "unknown argument: $1" ;;
  esac
  shift
done

qps_flags=()
if [ -n "$api_qps" ]; then
  [[ "$api_qps" =~ ^[1-9][0-9]{0,4}$ ]] || bad_usage "--api-qps must be an integer from 1 to 99999, not '$api_qps'"
  qps_flags=(--kube-api-qps "$api_qps" --kube-api-burst "$((2 * api_qps))")
fi

if [ -z "$pods_ready_timeout" ]; then
  if $real_node; then pods_ready_timeout=120; else pods_ready_timeout=15; fi
fi
[[ "$pods_ready_timeout" =~ ^[1-9][0-9]{0,4}$ ]] ||
  bad_usage "--pods-ready-timeout must be an integer from 1 to 99999, not '$pods_ready_timeout'"

source "$here/node.sh"
[[ "$real_nodes" =~ ^[1-9][0-9]{0,3}$ ]] && [ "$real_nodes" -le "$MAX_REAL_NODES" ] ||
  bad_usage "--real-nodes must be an integer from 1 to $MAX_REAL_NODES, not '$real_nodes'"
! $real_node || node_check "$real_nodes"
if $network_policy; then
  $real_node || bad_usage "--network-policy needs --real-node or --real-nodes N (kwok's pods have no network)"
  "$here/network-policy.sh" check
fi
crds_dir="$(cd "$JAXT_ROOT/.." && pwd)/shared/crds"
[ -d "$crds_dir" ] || die "CRDs not found in $crds_dir (../shared/crds relative to the repository)"

if $controllers; then "$here/build.sh" >&2; else "$here/build.sh" --core >&2; fi

[ -n "$state" ] || state="$(mktemp -d "${TMPDIR:-/tmp}/jaxt-cluster.XXXXXX")"
mkdir -p "$state"/{pids,logs,pki,etcd}
state="$(cd "$state" && pwd)"
[ -z "$(ls "$state/pids")" ] || die "$state already runs a cluster (stop it with down.sh $state)"

on_error() {
  local rc=$?
  log "cluster start failed; last lines of each log (all logs: $state/logs):"
  for f in "$state"/logs/*.log; do
    [ -f "$f" ] || continue
    printf -- '--- %s\n' "$(basename "$f")" >&2
    tail -n 15 "$f" >&2
  done
  "$here/down.sh" --keep-logs "$state" >&2 || true
  exit "$rc"
}
trap on_error ERR

# --- ports: ask the kernel for free ones, all at once so they are distinct.
read -r etcd_port etcd_peer_port api_port kwok_port jobset_webhook_port jobset_health_port \
  to_webhook_port to_health_port trainer_webhook_port trainer_health_port trainer_status_port \
  kueue_webhook_port kueue_health_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(13)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks: s.close()')
service_network=10.96.0.0/16
cat > "$state/env" <<EOF
KUBECONFIG=$state/kubeconfig
API_SERVER=https://127.0.0.1:$api_port
NAMESPACE=$namespace
SERVICE_NETWORK=$service_network
EOF

# --- certificates and kubeconfigs
"$here/certs.sh" "$state/pki" >&2
pki="$state/pki"
kubeconfig() {  # FILE CERT_NAME
  local f="$1" c="$2"
  kubectl config --kubeconfig "$f" set-cluster jaxt-e2e --server "https://127.0.0.1:$api_port" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-credentials "$c" --client-certificate "$pki/$c.crt" \
    --client-key "$pki/$c.key" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-context jaxt-e2e --cluster jaxt-e2e --user "$c" \
    --namespace "$namespace" >/dev/null
  kubectl config --kubeconfig "$f" use-context jaxt-e2e >/dev/null
  chmod 600 "$f"
}
kubeconfig "$state/kubeconfig" admin
kubeconfig "$state/controller-manager.kubeconfig" controller-manager
kubeconfig "$state/scheduler.kubeconfig" scheduler
export KUBECONFIG="$state/kubeconfig"

# start NAME ARGS...: runs a daemon in its own session (so a terminal's signals do not reach it),
# logs to logs/NAME.log, pid in pids/NAME.pid. down.sh stops it by that pid.
start() {
  local name="$1"; shift
  setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$state/pids/$name.pid"
}
# wait_for WHAT COMMAND...: retries COMMAND for up to $timeout seconds.
wait_for() {
  local what="$1"; shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { log "timed out after ${timeout}s waiting for $what"; return 1; }
    for f in "$state"/pids/*.pid; do
      kill -0 "$(cat "$f")" 2>/dev/null || { log "$(basename "$f" .pid) exited"; return 1; }
    done
    sleep 0.5
  done
}

# --- the reaper: stops the cluster when the owner exits or the lifetime is over.
setsid bash -c '
  end=$((SECONDS + $1)); owner="$2"
  while [ $SECONDS -lt $end ]; do
    [ -z "$owner" ] || kill -0 "$owner" 2>/dev/null || break
    [ -d "$3/pids" ] || exit 0
    sleep 2
  done
  exec "$4" "$3"' reaper "$max_lifetime" "$owner_pid" "$state" "$here/down.sh" \
  >"$state/logs/reaper.log" 2>&1 </dev/null &
echo $! >"$state/reaper.pid"

# --- etcd
start etcd "$JAXT_BIN/etcd" --name jaxt-e2e --data-dir "$state/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "jaxt-e2e=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync --log-level warn
wait_for etcd curl -fsS "http://127.0.0.1:$etcd_port/health"

# --- kube-apiserver (a real kubelet is authorized as a node and reached by its InternalIP). The
# service-account token issuer is its own URL: a controller on this machine that verifies tokens
# (Kubeflow Trainer's status server) finds the issuer's OIDC discovery there.
authorization=RBAC
admission=PodSecurity,NamespaceLifecycle,ServiceAccount,LimitRanger,ResourceQuota,DefaultTolerationSeconds
apiserver_node_flags=()
if $real_node; then
  authorization=Node,RBAC admission+=,NodeRestriction
  apiserver_node_flags=(--kubelet-preferred-address-types InternalIP,Hostname)
fi
start kube-apiserver "$JAXT_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --service-account-issuer "https://127.0.0.1:$api_port" \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range "$service_network" \
  --authorization-mode "$authorization" --enable-admission-plugins "$admission" \
  --kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key" \
  --enable-priority-and-fairness=false --profiling=false "${apiserver_node_flags[@]}"
wait_for kube-apiserver kubectl get --raw /readyz

# --- controllers, scheduler, kwok
start kube-controller-manager "$JAXT_BIN/kube-controller-manager" \
  --kubeconfig "$state/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$state/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials --leader-elect=false --secure-port 0 \
  --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
  "${qps_flags[@]}"
start kube-scheduler "$JAXT_BIN/kube-scheduler" \
  --kubeconfig "$state/scheduler.kubeconfig" \
  --authentication-kubeconfig "$state/scheduler.kubeconfig" \
  --authorization-kubeconfig "$state/scheduler.kubeconfig" \
  --leader-elect=false --secure-port 0 "${qps_flags[@]}"
if ! $real_node; then
# kwok serves `kubectl logs` of fake pods from a file (ClusterLogs in kwok/logs.yaml).
cp "$here/kwok/pod.log" "$state/pod.log"
sed "s#@LOGS_FILE@#$state/pod.log#" "$here/kwok/logs.yaml" >"$state/kwok-logs.yaml"
start kwok "$JAXT_BIN/kwok" --kubeconfig "$state/kubeconfig" \
  --config "$here/kwok/stages.yaml" --config "$state/kwok-logs.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-ip 127.0.0.1 --node-port "$kwok_port" --node-lease-duration-seconds 40 \
  --server-address "127.0.0.1:$kwok_port" \
  --tls-cert-file "$pki/kwok.crt" --tls-private-key-file "$pki/kwok.key" \
  --cidr 10.244.0.1/16 -v WARN
fi

# --- cluster content: nodes, our namespace, CRDs
if $real_node; then
  node_up >&2
  for ((node_number = 2; node_number <= real_nodes; node_number++)); do node_add "$node_number" >&2; done
  if $network_policy; then
    # kube-router reads (only): pods, namespaces and NetworkPolicies, which decide who reaches a pod; its
    # node, for its address; Services and endpoints, which it watches whatever of it runs.
    kubeconfig "$state/kube-router.kubeconfig" kube-router
    kubectl apply --server-side -f - >&2 <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: jax-training:kube-router}
rules:
- {apiGroups: [""], resources: [pods, namespaces, nodes, services, endpoints], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: jax-training:kube-router}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jax-training:kube-router}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: jax-training-kube-router}
EOF
    "$here/network-policy.sh" start "$state" >&2
  fi
else
  kubectl apply --server-side -f "$here/kwok/nodes.yaml" >&2
fi
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
kubectl label --overwrite namespace "$namespace" \
  pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest \
  pod-security.kubernetes.io/warn=restricted pod-security.kubernetes.io/audit=restricted >&2
for f in "$crds_dir"/*.yaml; do
  grep -q '^kind: CustomResourceDefinition' "$f" && kubectl apply --server-side -f "$f" >/dev/null
done
wait_for "CRDs" kubectl wait --for condition=Established crd --all --timeout 5s
wait_for "nodes Ready" kubectl wait --for condition=Ready node --all --timeout 5s
wait_for "service account default/$namespace" kubectl -n "$namespace" get serviceaccount default

if $controllers; then
  # JobSet controller: webhooks served on 127.0.0.1 with our webhook cert, no cert rotation.
  mkdir -p "$state/jobset-certs"
  cp "$pki/webhook.crt" "$state/jobset-certs/tls.crt"
  cp "$pki/webhook.key" "$state/jobset-certs/tls.key"
  cat >"$state/jobset-config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $jobset_webhook_port
  certDir: $state/jobset-certs
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$jobset_health_port
EOF
  start jobset-controller "$JAXT_BIN/jobset-controller" --config "$state/jobset-config.yaml" \
    --zap-devel=false
  sed -e "s#@URL@#https://127.0.0.1:$jobset_webhook_port#" -e "s#@CA_BUNDLE@#$(base64 -w0 "$pki/ca.crt")#" \
    "$here/controllers/jobset-webhooks.yaml" | kubectl apply --server-side -f - >&2
  wait_for "jobset-controller" curl -fsS "http://127.0.0.1:$jobset_health_port/readyz"

  # Kubeflow training-operator (JAXJob only). It rotates its own webhook certs unless the Secret
  # already holds valid ones; ours are also valid for 127.0.0.1, where it serves.
  tpki="$JAXT_CACHE/cluster/training-operator-pki"
  "$here/controllers/training-operator-certs.sh" "$tpki" >&2
  kubectl create namespace kubeflow --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
  kubectl -n kubeflow create secret generic training-operator-webhook-cert \
    --from-file "ca.crt=$tpki/ca.crt" --from-file "ca.key=$tpki/ca.key" \
    --from-file "tls.crt=$tpki/tls.crt" --from-file "tls.key=$tpki/tls.key" \
    --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
  sed -e "s#@URL@#https://127.0.0.1:$to_webhook_port#" -e "s#@CA_BUNDLE@#$(base64 -w0 "$tpki/ca.crt")#" \
    "$here/controllers/training-operator-webhooks.yaml" | kubectl apply --server-side -f - >&2
  # Its cert rotator waits for the Secret's files where a pod would mount them: a fixed path,
  # shared by every cluster on this machine (hence one cached set of certs for all of them).
  mkdir -p "$TRAINING_OPERATOR_CERT_DIR"
  for f in tls.crt tls.key ca.crt; do
    cmp -s "$tpki/$f" "$TRAINING_OPERATOR_CERT_DIR/$f" || cp "$tpki/$f" "$TRAINING_OPERATOR_CERT_DIR/$f"
  done
  MY_POD_NAMESPACE=kubeflow start training-operator "$JAXT_BIN/training-operator" \
    --enable-scheme jaxjob \
    --webhook-server-port "$to_webhook_port" --metrics-bind-address 0 \
    --health-probe-bind-address "127.0.0.1:$to_health_port" --zap-devel=false
  wait_for "training-operator" curl -fsS "http://127.0.0.1:$to_health_port/readyz"

  # Kubeflow Trainer v2 (TrainJob, run as a JobSet). No cert rotation: it serves our webhook cert
  # from <TMPDIR>/k8s-webhook-server/serving-certs (controller-runtime's default), so a TMPDIR of
  # its own keeps clusters apart. It also watches TrainingRuntimes (CRD from build.sh).
  # With its TrainJobStatus feature gate, its status server takes the pods' progress reports
  # (trainer/trainjob_status.py) at https://$TRAINER_SERVICE.$TRAINER_NAMESPACE.svc:<port>, verified
  # by the pods with the ca.crt of the Secret its runtime copies, and checks their tokens with the
  # issuer an in-cluster token file names. It reads that file and its serving cert from fixed paths
  # (the training-operator's cert dir is the same): it runs in a mount namespace of its own where
  # both are this cluster's files. The real node's pods reach it through a headless Service whose
  # endpoint is the node's address (it listens on every interface).
  kubectl apply --server-side \
    -f "$JAXT_CACHE/tools/trainer-$TRAINER_VERSION/trainer.kubeflow.org_trainingruntimes.yaml" >/dev/null
  wait_for "CRDs" kubectl wait --for condition=Established crd --all --timeout 5s
  trainer_certs="$state/trainer-tmp/k8s-webhook-server/serving-certs"
  mkdir -p "$trainer_certs" "$state/trainer-sa" "$SERVICE_ACCOUNT_DIR"
  cp "$pki/trainer.crt" "$trainer_certs/tls.crt"
  cp "$pki/trainer.key" "$trainer_certs/tls.key"
  kubectl create namespace "$TRAINER_NAMESPACE" --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
  kubectl -n "$TRAINER_NAMESPACE" create serviceaccount "$TRAINER_SERVICE" --dry-run=client -o yaml |
    kubectl apply --server-side -f - >&2
  kubectl -n "$TRAINER_NAMESPACE" create token "$TRAINER_SERVICE" --duration 1h >"$state/trainer-sa/token"
  echo "$TRAINER_NAMESPACE" >"$state/trainer-sa/namespace"
  kubectl -n "$TRAINER_NAMESPACE" create secret generic kubeflow-trainer-webhook-cert \
    --from-file "ca.crt=$pki/ca.crt" --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
  if $real_node; then
    node_address="$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')"
    kubectl apply --server-side -f - >&2 <<EOF
apiVersion: v1
kind: Service
metadata: {name: $TRAINER_SERVICE, namespace: $TRAINER_NAMESPACE}
spec:
  clusterIP: None
  ports: [{name: status, port: $trainer_status_port, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $TRAINER_SERVICE-host
  namespace: $TRAINER_NAMESPACE
  labels: {kubernetes.io/service-name: $TRAINER_SERVICE, endpointslice.kubernetes.io/managed-by: jax-training-up.sh}
addressType: IPv4
ports: [{name: status, port: $trainer_status_port, protocol: TCP}]
endpoints: [{addresses: ["$node_address"], conditions: {ready: true}}]
EOF
  fi
  cat >"$state/trainer-config.yaml" <<EOF
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
certManagement:
  enable: false
  webhookServiceName: $TRAINER_SERVICE
  webhookSecretName: kubeflow-trainer-webhook-cert
webhook:
  host: 127.0.0.1
  port: $trainer_webhook_port
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$trainer_health_port
statusServer:
  port: $trainer_status_port
featureGates:
  TrainJobStatus: true
EOF
  # shellcheck disable=SC2016
  TMPDIR="$state/trainer-tmp" start trainer-controller-manager \
    unshare --mount --propagation private sh -c 'mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 &&
      exec "$@"' own-mounts "$trainer_certs" "$TRAINING_OPERATOR_CERT_DIR" "$state/trainer-sa" "$SERVICE_ACCOUNT_DIR" \
    "$JAXT_BIN/trainer-controller-manager" --config "$state/trainer-config.yaml" --zap-devel=false
  sed -e "s#@URL@#https://127.0.0.1:$trainer_webhook_port#" -e "s#@CA_BUNDLE@#$(base64 -w0 "$pki/ca.crt")#" \
    "$here/controllers/trainer-webhooks.yaml" | kubectl apply --server-side -f - >&2
  wait_for "trainer-controller-manager" curl -fsS "http://127.0.0.1:$trainer_health_port/readyz"
  # The status server listens once it has read the token issuer's discovery document.
  wait_for "the Trainer status server" curl -sS -o /dev/null --cacert "$pki/ca.crt" \
    "https://127.0.0.1:$trainer_status_port/"
  # Its validating webhook admits runtimes, so they go in once it serves.
  wait_for "ClusterTrainingRuntime jax-distributed" \
    kubectl apply --server-side -f "$crds_dir/trainer_runtime_jax_distributed.yaml"

  # Kueue, after the kinds it integrates with exist: only jobs labelled with a queue are managed;
  # webhooks on 127.0.0.1 with our cert (no internal cert management), also as the conversion
  # webhook of the CRDs that serve two versions (upstream's config/components/crd patches).
  kubectl apply --server-side -f "$JAXT_CACHE/tools/kueue-$KUEUE_VERSION/kueue-crds.yaml" >/dev/null
  kueue_url="https://127.0.0.1:$kueue_webhook_port"
  conversion="{\"strategy\": \"Webhook\", \"webhook\": {\"conversionReviewVersions\": [\"v1\"],
    \"clientConfig\": {\"url\": \"$kueue_url/convert\", \"caBundle\": \"$(base64 -w0 "$pki/ca.crt")\"}}}"
  for crd in localqueues clusterqueues cohorts workloads multikueueclusters; do
    kubectl patch crd "$crd.kueue.x-k8s.io" --type merge -p "{\"spec\": {\"conversion\": $conversion}}" >/dev/null
  done
  wait_for "CRDs" kubectl wait --for condition=Established crd --all --timeout 5s
  kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply --server-side -f - >&2
  mkdir -p "$state/kueue-certs"
  cp "$pki/webhook.crt" "$state/kueue-certs/tls.crt"
  cp "$pki/webhook.key" "$state/kueue-certs/tls.key"
  # waitForPodsReady: a job whose pods are not all ready in time is evicted and requeued after a
  # short backoff (upstream: 5 min, and 60 s doubling), long enough that the evicted gang is seen
  # stopped before it is admitted again, on a loaded host too. No visibility API server (it listens
  # on port 8082 of every interface: one per machine).
  cat >"$state/kueue-config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $kueue_webhook_port
  certDir: $state/kueue-certs
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$kueue_health_port
waitForPodsReady:
  timeout: ${pods_ready_timeout}s
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 10
    backoffMaxSeconds: 30
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
  - trainer.kubeflow.org/trainjob
featureGates:
  VisibilityOnDemand: false
EOF
  # Without internal cert management it reads a metrics serving cert from a fixed path even with
  # metrics off (nothing is served with it): any cert will do, shared by every cluster on this machine.
  if [ ! -f "$KUEUE_METRICS_CERT_DIR/tls.crt" ]; then
    mkdir -p "$KUEUE_METRICS_CERT_DIR" ||
      die "cannot create $KUEUE_METRICS_CERT_DIR, where Kueue reads a certificate (run as root, or with --no-controllers)"
    cp "$pki/webhook.key" "$KUEUE_METRICS_CERT_DIR/tls.key"
    cp "$pki/webhook.crt" "$KUEUE_METRICS_CERT_DIR/tls.crt"
  fi
  start kueue "$JAXT_BIN/kueue" --config "$state/kueue-config.yaml" --zap-devel=false
  wait_for "kueue" curl -fsS "http://127.0.0.1:$kueue_health_port/readyz"
  sed -e "s#@URL@#$kueue_url#" -e "s#@CA_BUNDLE@#$(base64 -w0 "$pki/ca.crt")#" \
    "$here/controllers/kueue-webhooks.yaml" | kubectl apply --server-side -f - >&2
fi

trap - ERR
log "cluster ready: $(kubectl get --raw /version | sed -n "s/.*\"gitVersion\": *\"\([^\"]*\)\".*/\1/p") at https://127.0.0.1:$api_port, namespace $namespace, state $state"
echo "$state/kubeconfig"
