#!/usr/bin/env bash
# Takes a real node of up.sh --real-nodes N away the ways a node goes, for tests and benchmarks:
#   power-off  SIGKILL, at once, to the node's kubelet, its containerd, containerd's shims and every
#              process in the node's cgroup root (its pods' containers): nothing of it runs any more,
#              nothing is told; its disk (root dir, containerd's root and state) stays as it was
#   power-on   the node's containerd and kubelet started again on that disk; waits until it is Ready
#   reboot     power-off, then power-on SECONDS later (default 60)
#   drain      kubectl drain --ignore-daemonsets --delete-emptydir-data (evictions: the pods' graceful stop)
#   uncordon   kubectl uncordon: the node takes pods again after a drain
# Only nodes 2..N: node 1 also runs the cluster DNS of every node. down.sh cleans up after any of
# these. Prints the time of the fault (power-off, reboot, drain: seconds since the epoch, when the
# signals went or the drain began) on stdout.
# Usage: scripts/cluster/node-fault.sh STATE_DIR NODE power-off|power-on|reboot [SECONDS]|drain|uncordon
#   NODE: the node's name (NODE_NAME-I of node.env) or its number I
# Exit: 0 done, 1 failed, 2 bad usage.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/node.sh"

case "${1:-}" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 3 ] && [ $# -le 4 ] ||
  bad_usage "usage: scripts/cluster/node-fault.sh STATE_DIR NODE power-off|power-on|reboot [SECONDS]|drain|uncordon"
state="$1" node_arg="$2" action="$3" back_after="${4:-60}"
timeout=120  # node.sh's waits
[ -f "$state/kubeconfig" ] || bad_usage "$state is not the state directory of a running cluster (scripts/cluster/up.sh)"
export KUBECONFIG="$state/kubeconfig"
number="${node_arg#"$NODE_NAME"-}"
[ "$node_arg" != "$NODE_NAME" ] && [ "$node_arg" != 1 ] ||
  bad_usage "NODE: node 1 ($NODE_NAME) runs the cluster DNS of every node; take nodes 2..N away"
[[ "$number" =~ ^[0-9]+$ ]] && [ -f "$state/node-$number/node.env" ] ||
  bad_usage "NODE: '$node_arg' is no real node 2..N of $state (up.sh --real-nodes N names them $NODE_NAME-I)"
[ "$action" != reboot ] || [[ "$back_after" =~ ^[0-9]+$ ]] || bad_usage "SECONDS: '$back_after' is not a whole number"
node="$state/node-$number" name="$NODE_NAME-$number"
setting() { sed -n "s/^$1=//p" "$node/node.env"; }
sock="$(setting SOCKET)" cgroup_root="$(setting CGROUP_ROOT)"

# up.sh's way of starting a daemon (pid in pids/NAME.pid, where down.sh finds it), its log appended to.
start() {
  local daemon="$1"; shift
  setsid "$@" >>"$state/logs/$daemon.log" 2>&1 </dev/null &
  echo $! >"$state/pids/$daemon.pid"
}
wait_for() {  # WHAT COMMAND...: COMMAND succeeds within $timeout seconds
  local what="$1" deadline=$((SECONDS + timeout)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out after ${timeout}s waiting for $what"
    sleep 0.5
  done
}

# The node's processes: its kubelet and containerd (by their pid files, if they still run that
# node's binary), the shims of its containerd socket and whatever runs in its cgroup root.
node_pids() {
  local daemon pid cmd procs
  for daemon in "kubelet-$number" "containerd-$number"; do
    pid="$(cat "$state/pids/$daemon.pid" 2>/dev/null)" || continue
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" && [[ "$cmd" == *"$node/"* ]] && echo "$pid"
  done
  for procs in /proc/[0-9]*/cmdline; do
    cmd="$(tr '\0' ' ' <"$procs" 2>/dev/null)" || continue
    [[ "$cmd" == containerd-shim*" -address $sock "* || "$cmd" == containerd-shim*" -address $sock" ]] &&
      { pid="${procs#/proc/}"; echo "${pid%/cmdline}"; }
  done
  find /sys/fs/cgroup/*"$cgroup_root" /sys/fs/cgroup"$cgroup_root" -name cgroup.procs -exec cat {} + 2>/dev/null
}

power_off() {
  local pids=() rounds=0
  mapfile -t pids < <(node_pids | sort -un)
  [ ${#pids[@]} -gt 0 ] || die "$name is already off: none of its processes runs"
  date +%s.%N
  # What a power cut does: every process at once, none told. A process forked meanwhile (a probe, a
  # shim starting a container) is caught by the next round.
  while [ ${#pids[@]} -gt 0 ]; do
    kill -KILL "${pids[@]}" 2>/dev/null
    ((++rounds < 100)) || die "processes of $name still run after 100 rounds of SIGKILL: ${pids[*]}"
    sleep 0.1
    mapfile -t pids < <(node_pids | sort -un | while read -r pid; do [ -e "/proc/$pid" ] && echo "$pid"; done)
  done
  log "$name powered off: its kubelet, containerd, shims and containers killed"
}

# The node's kubelet runs and its node is Ready. containerd answers before its CRI is up (on a disk
# with a power cut's dead containers to clean up, a second or more later): a kubelet started in
# that gap exits at once ("server is not initialized yet"), and is started again.
kubelet_ready() {
  kill -0 "$(cat "$state/pids/kubelet-$number.pid")" 2>/dev/null || node_start_kubelet "$number"
  kubectl wait --for condition=Ready "node/$name" --timeout 5s
}

power_on() {
  [ -z "$(node_pids)" ] || die "$name is on: power it off first"
  start "containerd-$number" containerd --config "$node/containerd/config.toml"
  wait_for "containerd-$number" ctr --address "$sock" version
  node_start_kubelet "$number"
  wait_for "node/$name Ready" kubelet_ready
  log "$name powered on and Ready"
}

case "$action" in
  power-off) power_off ;;
  power-on) power_on ;;
  reboot) power_off; sleep "$back_after"; power_on ;;
  drain)
    date +%s.%N
    kubectl drain "$name" --ignore-daemonsets --delete-emptydir-data --timeout 300s >&2 || die "kubectl drain $name failed" ;;
  uncordon) kubectl uncordon "$name" >&2 || die "kubectl uncordon $name failed" ;;
  *) bad_usage "unknown fault '$action' (power-off, power-on, reboot, drain, uncordon)" ;;
esac
