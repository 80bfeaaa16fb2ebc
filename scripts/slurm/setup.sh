#!/usr/bin/env bash
# Installs a single-node SLURM (slurmctld, slurmd, client tools) and munge from Debian's packages.
# Idempotent: does nothing when every binary is already there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
[ $# -eq 0 ] || bad_usage "unknown argument: $1 (usage: scripts/slurm/setup.sh)"

needed=(slurmctld slurmd sbatch srun squeue sacct scontrol sinfo munged munge unmunge)
missing=()
for bin in "${needed[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$bin" >/dev/null 2>&1 \
    || missing+=("$bin")
done
if [ "${#missing[@]}" -eq 0 ]; then
  log "slurm and munge already installed"
  exit 0
fi

log "missing: ${missing[*]}"
apt_install slurmctld slurmd slurm-client munge
log "installed: $(slurmctld -V 2>/dev/null || /usr/sbin/slurmctld -V)"
