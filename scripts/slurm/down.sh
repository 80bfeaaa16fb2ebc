#!/usr/bin/env bash
# Stops the local SLURM started by up.sh and removes its state. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/env.sh"
[ $# -eq 0 ] || bad_usage "unknown argument: $1 (usage: scripts/slurm/down.sh)"

D="$JAXT_SLURM_DIR"
[ -d "$D" ] || { log "not running (no $D)"; exit 0; }

# Cancel every job first so no step outlives its slurmd.
if pid_alive "$D/slurmctld.pid" && [ -f "$JAXT_SLURM_CONF" ]; then
  jobs="$(timeout 10 squeue -h -o %i 2>/dev/null || true)"
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
fi
# The reaper (up.sh --owner-pid) is not needed any more, unless it is the one running this script.
if pid_alive "$D/reaper.pid" && [ "$(cat "$D/reaper.pid")" != "$PPID" ] && [ "$(cat "$D/reaper.pid")" != "$$" ]; then
  kill "$(cat "$D/reaper.pid")" 2>/dev/null || true
fi
rm -f "$D/reaper.pid"
# Order matters: slurmd, then slurmctld (which writes its state on exit), then munged; only then
# may the state go, or a lingering controller writes into the next run.
stop_pid "$D/slurmd.pid" slurmd 15
stop_pid "$D/slurmctld.pid" slurmctld 20
stop_pid "$D/munged.pid" munged 10
rm -rf "$D"
log "SLURM stopped, $D removed"
