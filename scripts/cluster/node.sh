# shellcheck shell=bash
# Sourced by up.sh --real-node (it uses up.sh's start, wait_for, kubeconfig, $state, $pki and
# $timeout): node_up adds one real node to the control plane: containerd + runc with bridge CNI, a
# kubelet, CoreDNS serving cluster DNS and kube-proxy serving Service addresses, with the trainer
# image (scripts/image.sh) and a local pod sandbox image imported (no registry is involved). Needs root. All state goes under STATE_DIR/node;
# every change to the host is recorded there and reverted by node-down.sh. With up.sh --real-nodes N,
# node_add adds nodes 2..N beside it (under STATE_DIR/node-I), each with its own containerd.
source "$here/node.env"

# node_check: fails early (before the control plane starts) when this host cannot run the node.
node_check() {  # [NODES]
  local nodes="${1:-1}" i
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
  for ((i = 2; i <= nodes; i++)); do
    if ip link show "jaxt$((i - 1))" >/dev/null 2>&1 || [ -e "/sys/fs/cgroup/memory/$NODE_NAME-$i" ]; then
      die "another real node runs on this host (jaxt$((i - 1)) or the cgroup /$NODE_NAME-$i exists): stop it with scripts/cluster/down.sh"
    fi
  done
}

# node_containerd NODE_DIR SOCKET BRIDGE SUBNET: the config of one node's containerd (own root,
# state and socket; no OOM score changes, as root lacks CAP_SYS_RESOURCE on some hosts; the local
# sandbox image; runc with cgroupfs) and its bridge CNI network.
node_containerd() {
  local node="$1" sock="$2" bridge="$3" subnet="$4"
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
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
}

# node_images SOCKET: the pod sandbox and the trainer image into one node's containerd, from
# archives (no registry).
node_images() {
  local sock="$1" pause_archive trainer_archive archive
  pause_archive="$JAXT_CACHE/images/pause.tar"
  if [ ! -f "$pause_archive" ] || [ "$pause_archive" -ot "$JAXT_BIN/pause" ]; then
    "$here/pause-image.sh" "$PAUSE_IMAGE" "$pause_archive" >&2
  fi
  trainer_archive="$("$JAXT_ROOT/scripts/image.sh" --print-archive)"
  for archive in "$pause_archive" "$trainer_archive"; do
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$archive" >/dev/null ||
      die "importing $archive into containerd failed"
  done
}

# node_kubelet_config NODE_DIR SOCKET NODE_IP PORT HEALTH_PORT [CGROUP_ROOT]: one kubelet's config.
node_kubelet_config() {
  local node="$1" sock="$2" node_ip="$3" kubelet_port="$4" kubelet_health_port="$5" cgroup_root="${6:-}"
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
  [ -z "$cgroup_root" ] || echo "cgroupRoot: $cgroup_root" >>"$node/kubelet.yaml"
}

# node_ip: this host's IPv4 address, every real node's InternalIP.
node_ip() {
  local ip
  ip="$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')"
  [ -n "$ip" ] || ip="$(hostname -I | awk '{print $1}')"
  [ -n "$ip" ] || die "cannot tell this host's IPv4 address (the kubelet's node IP)"
  echo "$ip"
}

# free_ports: two free ports of 127.0.0.1 (a kubelet's and its health port's).
free_ports() {
  python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])'
}

# node_wait_ready NAME
node_wait_ready() {
  wait_for "node/$1" kubectl get node "$1"
  wait_for "node/$1 Ready" kubectl wait --for condition=Ready "node/$1" --timeout 5s
}

node_up() {
  local node="$state/node" node_ip kubelet_port kubelet_health_port sock
  mkdir -p "$node"/{containerd,cni/net.d,cni/ipam,kubelet,pod-logs,volumes}
  node_ip="$(node_ip)"
  read -r kubelet_port kubelet_health_port < <(free_ports)
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

  # --- containerd, and the images
  sock="$CONTAINERD_SOCKET"
  node_containerd "$node" "$sock" "$NODE_BRIDGE" "$POD_SUBNET"
  start containerd containerd --config "$node/containerd/config.toml"
  wait_for containerd ctr --address "$sock" version
  node_images "$sock"

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
  node_kubelet_config "$node" "$sock" "$node_ip" "$kubelet_port" "$kubelet_health_port"
  start kubelet "$JAXT_BIN/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
    --root-dir "$node/kubelet" --cert-dir "$node/kubelet/pki" --hostname-override "$NODE_NAME" \
    --node-ip "$node_ip" -v 1
  node_wait_ready "$NODE_NAME"
  # CoreDNS answers for the cluster (an A query of the API server's Service name).
  wait_for "cluster DNS" python3 -c "
import socket, struct, sys
q = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00' + b''.join(bytes([len(p)]) + p.encode() for p in 'kubernetes.default.svc.$CLUSTER_DOMAIN'.split('.')) + b'\x00\x00\x01\x00\x01'
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.sendto(q, ('$CLUSTER_DNS_IP', 53))
sys.exit(0 if struct.unpack('>H', s.recv(512)[6:8])[0] > 0 else 1)"
  node_service_proxy
  log "node $NODE_NAME ready (kubelet on $node_ip:$kubelet_port, cluster DNS $CLUSTER_DNS_IP, pods $POD_SUBNET)"
}

# node_service_proxy: kube-proxy (iptables mode), so that a ClusterIP Service's address reaches its
# endpoints. ONE for the host, named after node 1: every node shares the host's network namespace,
# and the rules it writes serve the pods of all of them. It leaves the host's sysctls alone (conntrack
# sizes and timeouts, route_localnet) and opens no port (health and metrics servers off). Its chains
# (KUBE-*) are removed by node-down.sh with the kubelets'.
node_service_proxy() {
  kubeconfig "$node/kube-proxy.kubeconfig" kube-proxy
  start kube-proxy "$JAXT_BIN/kube-proxy" --kubeconfig "$node/kube-proxy.kubeconfig" \
    --hostname-override "$NODE_NAME" --proxy-mode iptables --cluster-cidr "$POD_NETWORK" \
    --healthz-bind-address "" --metrics-bind-address "" --nodeport-addresses primary \
    --iptables-localhost-nodeports=false \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
    --oom-score-adj 0 -v 1
  # its first sync is done when the portal chain is hooked into PREROUTING
  wait_for "kube-proxy's rules" iptables -t nat -C PREROUTING -m comment --comment "kubernetes service portals" \
    -j KUBE-SERVICES
}

# node_add I: node I (2..MAX_REAL_NODES) beside the first one (node_up): its own containerd (socket
# containerd-I.sock), kubelet root dir, cgroup root /NODE_NAME-I, bridge jaxt<I-1> and pods
# 10.200.<I-1>.0/24, under STATE_DIR/node-I; the first node's CoreDNS is its cluster DNS. Every node's
# bridge is on this host, so its routes join the pod subnets; one nat rule keeps pod-to-pod traffic
# between them unmasqueraded (the bridge plugin masquerades whatever leaves a pod's own subnet).
# The kubelet runs in a mount namespace of its own where the fixed /var/lib/kubelet/device-plugins
# (its device-plugin socket and checkpoint, which a kubelet empties when it starts) is a directory
# of this node; its root dir is a shared mount, so the volumes it mounts there reach containerd.
node_add() {
  local i="$1" name="$NODE_NAME-$1" node="$state/node-$1" bridge="jaxt$(($1 - 1))" subnet="10.200.$(($1 - 1)).0/24"
  local cgroup_root="/$NODE_NAME-$1" sock node_ip kubelet_port kubelet_health_port hierarchy cert
  sock="$(dirname "$CONTAINERD_SOCKET")/containerd-$i.sock"
  mkdir -p "$node"/{containerd,cni/net.d,cni/ipam,kubelet,pod-logs,device-plugins}
  # What node-down.sh reads to stop this node and revert its changes to the host.
  cat >"$node/node.env" <<EOF
NAME=$name
BRIDGE=$bridge
SUBNET=$subnet
SOCKET=$sock
CGROUP_ROOT=$cgroup_root
EOF
  node_ip="$(node_ip)"
  read -r kubelet_port kubelet_health_port < <(free_ports)

  # --- identity: a kubelet client certificate of this node, signed by the cluster's CA.
  cert="$pki/node-$name"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$cert.key" 2>/dev/null
  openssl req -new -key "$cert.key" -subj "/O=system:nodes/CN=system:node:$name" -out "$cert.csr"
  openssl x509 -req -in "$cert.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -extfile <(printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature,keyEncipherment \
      extendedKeyUsage=clientAuth) -out "$cert.crt" 2>/dev/null
  rm -f "$cert.csr"
  kubeconfig "$node/kubelet.kubeconfig" "node-$name"

  # --- the cgroup root, in every hierarchy (cpuset's needs its CPUs and memory nodes set).
  for hierarchy in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    hierarchy="${hierarchy%/}"
    [ -f "$hierarchy/cgroup.procs" ] && [ ! -d "$hierarchy$cgroup_root" ] || continue
    mkdir "$hierarchy$cgroup_root"
    echo "$hierarchy$cgroup_root" >>"$node/cgroups.made"
    if [ -f "$hierarchy/cpuset.cpus" ]; then
      cat "$hierarchy/cpuset.cpus" >"$hierarchy$cgroup_root/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$hierarchy$cgroup_root/cpuset.mems"
    fi
  done

  # --- containerd, and the images
  node_containerd "$node" "$sock" "$bridge" "$subnet"
  start "containerd-$i" containerd --config "$node/containerd/config.toml"
  wait_for "containerd-$i" ctr --address "$sock" version
  node_images "$sock"

  # --- pod to pod between the nodes' subnets, as the pods' own addresses
  iptables -t nat -C POSTROUTING -s "$POD_NETWORK" -d "$POD_NETWORK" -m comment --comment jax-training-pods -j RETURN \
    2>/dev/null ||
    iptables -t nat -I POSTROUTING 1 -s "$POD_NETWORK" -d "$POD_NETWORK" -m comment --comment jax-training-pods -j RETURN

  # --- the kubelet, in its own mount namespace
  mount --bind "$node/kubelet" "$node/kubelet"
  mount --make-shared "$node/kubelet"
  mkdir -p /var/lib/kubelet/device-plugins
  node_kubelet_config "$node" "$sock" "$node_ip" "$kubelet_port" "$kubelet_health_port" "$cgroup_root"
  node_start_kubelet "$i"
  node_wait_ready "$name"
  log "node $name ready (kubelet on $node_ip:$kubelet_port, pods $subnet on $bridge, cgroup root $cgroup_root)"
}

# node_start_kubelet I: node I's kubelet (its config written by node_add), in a mount namespace of its
# own; also how node-fault.sh brings a node back.
node_start_kubelet() {
  local i="$1" node="$state/node-$1"
  # shellcheck disable=SC2016
  start "kubelet-$i" unshare --mount --propagation unchanged sh -c '
      set -e
      # this namespace only: what holds the fixed directory stops propagating back to the host
      mount --make-slave "$(findmnt -n -o TARGET -T /var/lib/kubelet/device-plugins)"
      mount --bind "$1" /var/lib/kubelet/device-plugins
      shift
      exec "$@"' own-device-plugins "$node/device-plugins" \
    "$JAXT_BIN/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
    --root-dir "$node/kubelet" --cert-dir "$node/kubelet/pki" --hostname-override "$NODE_NAME-$i" \
    --node-ip "$(node_ip)" -v 1
}
