#!/usr/bin/env bash
# Stops a test control plane started by up.sh and removes its state directory. Only the processes
# recorded in STATE_DIR/pids are signalled (and only if they still run the binary they started
# with). Idempotent: a missing or already stopped STATE_DIR is not an error.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

usage() {
  cat <<EOF
Usage: scripts/cluster/down.sh [--keep-logs] STATE_DIR

Stops every process of the cluster in STATE_DIR (SIGTERM, then SIGKILL after 10 s) and deletes
STATE_DIR. --keep-logs keeps STATE_DIR/logs (and nothing else) for diagnosis.
EOF
}

keep_logs=false state=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep-logs) keep_logs=true ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; bad_usage "unknown option: $1" ;;
    *) [ -z "$state" ] || bad_usage "only one STATE_DIR"; state="$1" ;;
  esac
  shift
done
[ -n "$state" ] || { usage >&2; bad_usage "STATE_DIR is required"; }
[ -d "$state" ] || { log "nothing to stop: $state does not exist"; exit 0; }
state="$(cd "$state" && pwd)"

# A real node first, while the API server still runs (its pods are deleted through it).
if [ -d "$state/node" ]; then
  "$(dirname "${BASH_SOURCE[0]}")/node-down.sh" "$state" || log "warning: stopping the real node failed; stopping the rest"
fi

# Reverse start order: controllers first, etcd last.
order=(kueue trainer-controller-manager training-operator jobset-controller kwok kube-scheduler kube-controller-manager kube-apiserver etcd)
pids=()
for name in "${order[@]}"; do
  f="$state/pids/$name.pid"
  [ -f "$f" ] || continue
  pid="$(cat "$f")"
  # Guard against pid reuse: the process must still be the binary we started.
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
    [ "$name" != training-operator ] || stopped_training_operator=1
    [ "$name" != kueue ] || stopped_kueue=1
    [ "$name" != trainer-controller-manager ] || stopped_trainer=1
  fi
  rm -f "$f"
done
for pid in "${pids[@]}"; do
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { log "pid $pid did not stop on SIGTERM; killing it"; kill -KILL "$pid" 2>/dev/null || true; }
done

# The reaper (if this is not the reaper itself) has nothing left to watch.
if [ -f "$state/reaper.pid" ]; then
  rpid="$(cat "$state/reaper.pid")"
  if [ "$rpid" != "$$" ] && [ "$rpid" != "$PPID" ] && [ -r "/proc/$rpid/cmdline" ] &&
     tr '\0' ' ' <"/proc/$rpid/cmdline" | grep -q reaper; then
    kill -TERM "$rpid" 2>/dev/null || true
  fi
fi

# The training-operator's fixed cert directory, once no training-operator of ours runs any more.
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"
if [ -n "${stopped_training_operator:-}" ] && ! pgrep -f "^$JAXT_BIN/training-operator " >/dev/null; then
  rm -rf "$TRAINING_OPERATOR_CERT_DIR"
  rmdir "$(dirname "$TRAINING_OPERATOR_CERT_DIR")" 2>/dev/null || true
fi

# Kueue's fixed metrics cert directory, likewise.
if [ -n "${stopped_kueue:-}" ] && ! pgrep -f "^$JAXT_BIN/kueue " >/dev/null; then
  rm -rf "$KUEUE_METRICS_CERT_DIR" || echo "down.sh: could not remove $KUEUE_METRICS_CERT_DIR" >&2
  rmdir "$(dirname "$KUEUE_METRICS_CERT_DIR")" "$(dirname "$(dirname "$KUEUE_METRICS_CERT_DIR")")" 2>/dev/null || true
fi

# The mount point of the Trainer's service-account files (up.sh), once no Trainer of ours runs: the
# empty directories only (a host that has such files keeps them).
if [ -n "${stopped_trainer:-}" ] && ! pgrep -f "^$JAXT_BIN/trainer-controller-manager " >/dev/null; then
  rmdir "$SERVICE_ACCOUNT_DIR" "$(dirname "$SERVICE_ACCOUNT_DIR")" "$(dirname "$(dirname "$SERVICE_ACCOUNT_DIR")")" \
    2>/dev/null || true
fi

if $keep_logs; then
  find "$state" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
  log "stopped; logs kept in $state/logs"
else
  rm -rf "$state"
  log "stopped and removed $state"
fi
