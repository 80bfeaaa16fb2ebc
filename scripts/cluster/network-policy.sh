#!/usr/bin/env bash
# NetworkPolicy enforcement on the real nodes of up.sh --network-policy: kube-router's firewall alone
# (no routing, no service proxy), ONE instance for the host. Every real node shares the host's network
# namespace and reports the host's address as its InternalIP, and kube-router enforces the policies of
# the pods whose status.hostIP is its own node's InternalIP (its netpol controller's getLocalPods): one
# instance, named after node 1, enforces them for the pods of every node; a second one would rewrite
# the same iptables chains. It adds to the host's filter table (chains KUBE-ROUTER-*, KUBE-NWPLCY-*,
# KUBE-POD-FW-*, and a jump to them in INPUT, FORWARD and OUTPUT) and ipsets KUBE-SRC-* and
# KUBE-DST-*; stop removes them all (kube-router's --cleanup-config does not: in v2.1.0 it cleans a
# firewall controller it never set up, which holds no iptables or ipset handle).
#
# Usage: scripts/cluster/network-policy.sh check | start STATE_DIR | stop STATE_DIR
#   check  fails when this host cannot run it (no ipset, no br_netfilter) or its chains are already there
#   start  starts it with STATE_DIR/kube-router.kubeconfig (up.sh makes it, with its RBAC), logs to
#          STATE_DIR/logs/kube-router.log, pid in STATE_DIR/pids/kube-router.pid; returns once its
#          chains are in the filter table
#   stop   stops it (by that pid) and removes its chains and ipsets; idempotent, and nothing to do
#          for a STATE_DIR without the kubeconfig
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/node.env"

CHAINS='^KUBE-(ROUTER-|NWPLCY-|POD-FW-)'
IPSETS='^KUBE-(SRC|DST)-'

ours() {  # the chains of kube-router's firewall now in the filter table
  iptables -t filter -S | awk -v re="$CHAINS" '$1 == "-N" && $2 ~ re { print $2 }'
}

check() {
  local tool
  for tool in ipset iptables-save iptables-restore; do
    command -v "$tool" >/dev/null || die "$tool is required to enforce NetworkPolicy (scripts/setup.sh node installs it)"
  done
  # Pods of one node talk through its bridge: iptables sees that traffic only with br_netfilter on.
  [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] ||
    die "net.bridge.bridge-nf-call-iptables is not 1 (module br_netfilter): iptables would not see the traffic" \
      "between the pods of one node"
  [ -z "$(ours)" ] || die "kube-router's chains are already in this host's filter table (another cluster's enforcer?):" \
    "stop it with scripts/cluster/down.sh"
}

pid_of() {  # the pid of STATE_DIR's kube-router, if it still runs
  local f="$state/pids/kube-router.pid" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$state/kube-router.kubeconfig" &&
    echo "$pid"
}

start() {
  ! pid_of >/dev/null || die "kube-router of $state already runs"
  [ -f "$state/kube-router.kubeconfig" ] || die "$state/kube-router.kubeconfig is missing (up.sh --network-policy makes it)"
  local service_network
  service_network="$(sed -n 's/^SERVICE_NETWORK=//p' "$state/env")"
  mkdir -p "$state/logs" "$state/pids"
  # No health or metrics port (both listen on every interface, a fixed port by default).
  setsid "$JAXT_BIN/kube-router" --kubeconfig "$state/kube-router.kubeconfig" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false \
    --service-cluster-ip-range "$service_network" --health-port 0 --metrics-port 0 \
    >>"$state/logs/kube-router.log" 2>&1 </dev/null &
  local pid=$! deadline=$((SECONDS + 60))
  echo "$pid" >"$state/pids/kube-router.pid"
  until grep -q -- '-j KUBE-ROUTER-FORWARD' <<<"$(iptables -t filter -S FORWARD)"; do
    # (kill -0, not pid_of: until the child has exec'd, its command line is this script's)
    kill -0 "$pid" 2>/dev/null || { tail -n 15 "$state/logs/kube-router.log" >&2; die "kube-router exited"; }
    [ $SECONDS -lt $deadline ] || die "kube-router set up no chains in 60 s (log: $state/logs/kube-router.log)"
    sleep 0.2
  done
  log "NetworkPolicy enforced by kube-router (pid $pid, node $NODE_NAME)"
}

stop() {
  local pid chain builtin set rules rule
  [ -f "$state/kube-router.kubeconfig" ] || return 0  # a cluster without it
  if pid="$(pid_of)"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$state/pids/kube-router.pid"
  command -v iptables >/dev/null || return 0
  # The jumps to its chains in the built-in ones, then its chains (emptied first: they jump to each other).
  for builtin in INPUT FORWARD OUTPUT; do
    rules="$(grep -E -- "-j KUBE-ROUTER-$builtin( |\$)" <<<"$(iptables -t filter -S "$builtin")" || true)"
    while read -r rule; do [ -z "$rule" ] || eval "iptables -t filter ${rule/#-A/-D}"; done <<<"$rules"
  done
  for chain in $(ours); do iptables -t filter -F "$chain"; done
  for chain in $(ours); do iptables -t filter -X "$chain"; done
  if command -v ipset >/dev/null; then
    for set in $(ipset list -n | grep -E "$IPSETS" || true); do ipset destroy "$set"; done
  fi
}

case "${1:-}" in
  check) [ $# -eq 1 ] || bad_usage "usage: scripts/cluster/network-policy.sh check"; check ;;
  start|stop)
    [ $# -eq 2 ] || bad_usage "usage: scripts/cluster/network-policy.sh $1 STATE_DIR"
    state="$(cd "$2" 2>/dev/null && pwd)" || die "no such state directory: $2"
    "$1" ;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) bad_usage "usage: scripts/cluster/network-policy.sh check | start STATE_DIR | stop STATE_DIR" ;;
esac
