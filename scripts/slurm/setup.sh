#!/usr/bin/env bash
# Installs a single-node SLURM (slurmctld, slurmd, client tools) and munge from Debian's packages.
# Idempotent: does nothing when every binary is already there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

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

[ "$(id -u)" -eq 0 ] || die "installing SLURM needs root (missing: ${missing[*]})"
command -v apt-get >/dev/null || die "apt-get not found: install slurmctld slurmd slurm-client munge by hand"
packages=(slurmctld slurmd slurm-client munge)
log "installing ${packages[*]} (missing: ${missing[*]})"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null; then
  log "apt-get install failed; refreshing the package lists once"
  apt-get update -q >/dev/null || die "apt-get update failed"
  apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null || die "apt-get install ${packages[*]} failed"
fi
log "installed: $(slurmctld -V 2>/dev/null || /usr/sbin/slurmctld -V)"
