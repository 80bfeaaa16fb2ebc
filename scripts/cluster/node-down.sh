#!/usr/bin/env bash
# Stops the real nodes of STATE_DIR (up.sh --real-node or --real-nodes N, node.sh) and reverts every
# change they made to the host: kube-router (up.sh --network-policy) goes first with its chains and
# ipsets (network-policy.sh stop), pods are deleted while the kubelets still run (so CNI tears their
# networks down), then the kubelets, CoreDNS, kube-proxy and the containerds are stopped by pid, and
# the mounts, the bridges, the lo address, the pod network's nat rule, the kubelets' and kube-proxy's
# iptables chains and cgroups (and the cgroup roots of nodes 2..N), their /var/log/containers links
# and ip_forward are restored. Idempotent; called by down.sh.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/node.env"

[ $# -eq 1 ] || bad_usage "usage: scripts/cluster/node-down.sh STATE_DIR"
state="$1" node="$1/node"
[ -d "$node" ] || exit 0
# Nodes 2..N (node.sh node_add), each described by its node.env (NAME, BRIDGE, SOCKET, CGROUP_ROOT).
extra_nodes=()
for dir in "$state"/node-[0-9]*; do
  [ -f "$dir/node.env" ] && extra_nodes+=("${dir##*/node-}")
done
extra() {  # NUMBER KEY: a value of node NUMBER's node.env
  sed -n "s/^$2=//p" "$state/node-$1/node.env"
}

running() {  # NAME: the pid of our NAME process, if it still runs that binary (kubelet-I and
  # containerd-I, of node I, name its directory)
  local f="$state/pids/$1.pid" pid pattern="$1"
  case "$1" in kubelet-*|containerd-*) pattern="$state/node-${1##*-}/" ;; esac
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern" && echo "$pid"
}
stop() {  # NAME...: SIGTERM, then SIGKILL after 10 s
  local name pid pids=()
  for name in "$@"; do
    pid="$(running "$name")" && { kill -TERM "$pid" 2>/dev/null; pids+=("$pid"); }
    rm -f "$state/pids/$name.pid"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# 0. The NetworkPolicy firewall, if up.sh started one.
"$here/network-policy.sh" stop "$state" || log "warning: stopping kube-router or removing its rules failed"

# 1. Pods go while the kubelets and the API server still run.
kubelets=(kubelet)
for i in "${extra_nodes[@]}"; do kubelets+=("kubelet-$i"); done
any_kubelet=false
for k in "${kubelets[@]}"; do running "$k" >/dev/null && any_kubelet=true; done
if $any_kubelet && [ -f "$state/kubeconfig" ]; then
  KUBECONFIG="$state/kubeconfig" timeout 60 kubectl delete pods --all --all-namespaces \
    --grace-period 1 --wait --timeout 50s >/dev/null 2>&1 || log "warning: some pods were not deleted in time"
fi
stop "${kubelets[@]}" coredns kube-proxy

# 2. Whatever each containerd still holds (pods deleted behind the kubelet's back), then containerd.
ctr_() { timeout 20 ctr --address "$sock" -n k8s.io "$@" 2>/dev/null; }
containerds=(containerd)
for i in "${extra_nodes[@]}"; do containerds+=("containerd-$i"); done
for name in "${containerds[@]}"; do
  if [ "$name" = containerd ]; then sock="$CONTAINERD_SOCKET"; else sock="$(extra "${name#containerd-}" SOCKET)"; fi
  if running "$name" >/dev/null; then
    for task in $(ctr_ tasks ls -q); do ctr_ tasks kill -s KILL "$task"; done
    sleep 0.5
    for task in $(ctr_ tasks ls -q); do ctr_ tasks rm -f "$task"; done
    for c in $(ctr_ containers ls -q); do ctr_ containers rm "$c"; done
  fi
done
stop "${containerds[@]}"

# 3. Mounts under the nodes' directories (a kubelet bind-mounts its root dir onto itself,
# containerd mounts rootfs, shm and netns), deepest first.
node_dirs=("$node")
for i in "${extra_nodes[@]}"; do node_dirs+=("$state/node-$i"); done
for dir in "${node_dirs[@]}"; do
  awk -v p="$dir/" 'index($2, p) == 1 || $2 == substr(p, 1, length(p) - 1) { print $2 }' /proc/self/mounts
done | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
# Network namespaces that containerd pinned under /run/netns (a pod's, when CNI teardown was cut short).
for ns in /var/run/netns/cni-*; do
  [ -e "$ns" ] || continue
  umount "$ns" 2>/dev/null; rm -f "$ns"
done

# 4. Network: the bridges, the DNS address, NAT rules of CNI and the pod network's, the kubelet's
# chains, ip_forward.
ip link del "$NODE_BRIDGE" 2>/dev/null || true
for i in "${extra_nodes[@]}"; do ip link del "$(extra "$i" BRIDGE)" 2>/dev/null || true; done
ip addr del "$CLUSTER_DNS_IP/32" dev lo 2>/dev/null || true
if command -v iptables >/dev/null; then
  while iptables -t nat -D POSTROUTING -s "$POD_NETWORK" -d "$POD_NETWORK" -m comment --comment jax-training-pods \
      -j RETURN 2>/dev/null; do :; done
fi
for table in filter nat mangle; do
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    rules="$("$ipt" -t "$table" -S 2>/dev/null)" || continue
    # the chains the node created (not those that were there before it): first the rules of
    # built-in chains that jump to them, then the chains themselves
    ours="$(grep -oE -- '^-N (KUBE-|CNI-)[^ ]*' <<<"$rules" | cut -d' ' -f2 |
            grep -vxF -f <(awk -v t="$ipt/$table" '$1 == t { print $2 }' "$node/chains.before" 2>/dev/null) || true)"
    for chain in $ours; do
      grep -E -- "^-A [A-Z]+ .*-j $chain( |\$)" <<<"$rules" | sed 's/^-A/-D/' |
        while read -r rule; do eval "$ipt -t $table $rule" 2>/dev/null; done
    done
    for chain in $ours; do "$ipt" -t "$table" -F "$chain" 2>/dev/null; done
    for chain in $ours; do "$ipt" -t "$table" -X "$chain" 2>/dev/null; done
  done
done
if [ -f "$node/host.env" ]; then
  IP_FORWARD="$(sed -n 's/^IP_FORWARD=//p' "$node/host.env")"
  [ -z "$IP_FORWARD" ] || echo "$IP_FORWARD" >/proc/sys/net/ipv4/ip_forward
fi

# 5. The kubelet's cgroups, log links and state outside STATE_DIR, and containerd's runtime dirs
# (when no other containerd runs on this host).
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$cg" ] || continue
  grep -qxF "$cg" "$node/cgroups.before" 2>/dev/null && continue
  find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
done
for i in "${extra_nodes[@]}"; do  # the cgroup roots node.sh made, with what the kubelet made in them
  while read -r cg; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < <(cat "$state/node-$i/cgroups.made" 2>/dev/null)
done
for dir in "${node_dirs[@]}"; do
  find /var/log/containers /var/log/pods -maxdepth 1 -lname "$dir/*" -delete 2>/dev/null || true
done
for d in /var/log/containers /var/log/pods; do rmdir "$d" 2>/dev/null || true; done
[ ! -f "$node/made-var-lib-kubelet" ] || rm -rf /var/lib/kubelet
if ! pgrep -x containerd >/dev/null; then
  rm -rf /run/containerd
  rmdir /var/run/netns 2>/dev/null || true
fi
rm -rf /var/lib/cni/results/jax-training-* "$(dirname "$CONTAINERD_SOCKET")" 2>/dev/null
for i in "${extra_nodes[@]}"; do rm -rf "$state/node-$i"; done
rm -rf "$node"
log "real node stopped and the host restored"
