# shellcheck shell=bash
# Sourced by up.sh --real-node (it uses up.sh's start, wait_for, kubeconfig, $state, $pki and
# $timeout): node_up adds one real node to the control plane: containerd + runc with bridge CNI, a
# kubelet, and CoreDNS serving cluster DNS, with the trainer image (scripts/image.sh) and a local pod
# sandbox image imported (no registry is involved). Needs root. All state goes under STATE_DIR/node;
# every change to the host is recorded there and reverted by node-down.sh.
source "$here/node.env"

# node_check: fails early (before the control plane starts) when this host cannot run the node.
node_check() {
  [ "$(id -u)" -eq 0 ] || die "a real node needs root (containerd, CNI, iptables)"
  local tool
  for tool in containerd ctr runc iptables ip buildah; do
    command -v "$tool" >/dev/null || die "$tool is required (scripts/setup.sh node installs it)"
  done
  [ -x "$CNI_BIN_DIR/bridge" ] || die "CNI plugins not found in $CNI_BIN_DIR (scripts/setup.sh node)"
  # One real node per host: the bridge and the DNS address are host-wide.
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || ip -4 addr show dev lo | grep -qF " $CLUSTER_DNS_IP/32"; then
    die "another real node runs on this host ($NODE_BRIDGE or $CLUSTER_DNS_IP exists): stop it with scripts/cluster/down.sh"
  fi
}

node_up() {
  local node="$state/node" node_ip kubelet_port kubelet_health_port sock pause_archive trainer_archive archive
  mkdir -p "$node"/{containerd,cni/net.d,cni/ipam,kubelet,pod-logs,volumes}
  node_ip="$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')"
  [ -n "$node_ip" ] || node_ip="$(hostname -I | awk '{print $1}')"
  [ -n "$node_ip" ] || die "cannot tell this host's IPv4 address (the kubelet's node IP)"
  read -r kubelet_port kubelet_health_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
  # What node-down.sh must restore, and what was there before (left alone by node-down.sh).
  echo "IP_FORWARD=$(cat /proc/sys/net/ipv4/ip_forward)" >"$node/host.env"
  for table in filter nat mangle; do
    for ipt in iptables ip6tables; do
      "$ipt" -t "$table" -S 2>/dev/null | awk -v t="$ipt/$table" '$1 == "-N" { print t, $2 }'
    done
  done >"$node/chains.before"
  ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods >"$node/cgroups.before" 2>/dev/null || true
  # The kubelet's fixed device-plugin directory, removed by node-down.sh only if the kubelet made it.
  [ -d /var/lib/kubelet ] || touch "$node/made-var-lib-kubelet"

  # --- identities: the node's and CoreDNS's (read-only) client certificates come from certs.sh.
  kubeconfig "$node/kubelet.kubeconfig" node
  kubeconfig "$node/coredns.kubeconfig" coredns
  kubectl apply --server-side -f - >&2 <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: jax-training:coredns}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: jax-training:coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jax-training:coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: jax-training-coredns}
EOF

  # --- containerd: own root, state and socket; no OOM score changes (root lacks CAP_SYS_RESOURCE
  # on some hosts); the local sandbox image; runc with cgroupfs.
  sock="$CONTAINERD_SOCKET"
  mkdir -p "$(dirname "$sock")"
  cat >"$node/containerd/config.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$node/cni/net.d"
EOF
  cat >"$node/cni/net.d/10-jax-training.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "jax-training", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  start containerd containerd --config "$node/containerd/config.toml"
  wait_for containerd ctr --address "$sock" version

  # --- images: the pod sandbox and the trainer, from archives (no registry)
  pause_archive="$JAXT_CACHE/images/pause.tar"
  if [ ! -f "$pause_archive" ] || [ "$pause_archive" -ot "$JAXT_BIN/pause" ]; then
    "$here/pause-image.sh" "$PAUSE_IMAGE" "$pause_archive" >&2
  fi
  trainer_archive="$("$JAXT_ROOT/scripts/image.sh" --print-archive)"
  for archive in "$pause_archive" "$trainer_archive"; do
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$archive" >/dev/null ||
      die "importing $archive into containerd failed"
  done

  # --- cluster DNS: CoreDNS on an address of lo, reached by pods through the bridge's gateway.
  ip addr add "$CLUSTER_DNS_IP/32" dev lo
  echo "LO_ADDRESS=$CLUSTER_DNS_IP/32" >>"$node/host.env"
  cat >"$node/Corefile" <<EOF
.:53 {
    bind $CLUSTER_DNS_IP
    errors
    health 127.0.0.1:0
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $node/coredns.kubeconfig jaxt-e2e
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
}
EOF
  start coredns "$JAXT_BIN/coredns" -conf "$node/Corefile"

  # --- the kubelet
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$sock
imageServiceEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_health_port
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $pki/ca.crt}}
authorization: {mode: Webhook}
clusterDNS: [$CLUSTER_DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
podLogsDir: $node/pod-logs
volumePluginDir: $node/kubelet/volume-plugins
resolvConf: /etc/resolv.conf
maxPods: 30
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# No image garbage collection: the node's images are imported, not pulled (image.sh, the pause image),
# so one collected on a disk over 85% full (a shared host's) can never come back, and every pod after
# it fails with "failed to get sandbox image".
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  start kubelet "$JAXT_BIN/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
    --root-dir "$node/kubelet" --cert-dir "$node/kubelet/pki" --hostname-override "$NODE_NAME" \
    --node-ip "$node_ip" -v 1
  wait_for "node/$NODE_NAME" kubectl get node "$NODE_NAME"
  wait_for "node/$NODE_NAME Ready" kubectl wait --for condition=Ready "node/$NODE_NAME" --timeout 5s
  # CoreDNS answers for the cluster (an A query of the API server's Service name).
  wait_for "cluster DNS" python3 -c "
import socket, struct, sys
q = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00' + b''.join(bytes([len(p)]) + p.encode() for p in 'kubernetes.default.svc.$CLUSTER_DOMAIN'.split('.')) + b'\x00\x00\x01\x00\x01'
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.sendto(q, ('$CLUSTER_DNS_IP', 53))
sys.exit(0 if struct.unpack('>H', s.recv(512)[6:8])[0] > 0 else 1)"
  log "node $NODE_NAME ready (kubelet on $node_ip:$kubelet_port, cluster DNS $CLUSTER_DNS_IP, pods $POD_SUBNET)"
}
