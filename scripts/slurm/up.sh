#!/usr/bin/env bash
# Starts a single-node SLURM (munged, slurmctld, slurmd) with its state under $JAXT_SLURM_DIR.
# Idempotent: when everything is already running it only prints the environment to use.
# Prints `export SLURM_CONF=...` on stdout (also written to $JAXT_SLURM_DIR/env).
# Exit 0 when the node is idle, non-zero (with the daemon logs' tail) otherwise.
#   --owner-pid PID   stop everything (down.sh) once process PID is gone, e.g. a killed test run
# Environment: JAXT_SLURM_DIR (state), JAXT_SLURMCTLD_PORT, JAXT_SLURMD_PORT, JAXT_SLURM_CPUS,
# JAXT_SLURM_GPUS, JAXT_SLURM_FIRST_JOB_ID, JAXT_SLURM_CRED_EXPIRE, JAXT_SLURM_BF_INTERVAL (see env.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/common.sh"
source "$here/env.sh"

owner_pid=""
while [ $# -gt 0 ]; do
  case "$1" in
    --owner-pid) need_value "$@"; owner_pid="$2"; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done

[[ "$JAXT_SLURM_CRED_EXPIRE" =~ ^[0-9]{1,6}$ ]] && [ "$JAXT_SLURM_CRED_EXPIRE" -ge 5 ] ||
  bad_usage "JAXT_SLURM_CRED_EXPIRE must be a whole number of seconds, at least 5 (SLURM's minimum)"
[[ "$JAXT_SLURM_BF_INTERVAL" =~ ^[1-9][0-9]{0,3}$ ]] ||
  bad_usage "JAXT_SLURM_BF_INTERVAL must be a whole number of seconds from 1 to 9999"
D="$JAXT_SLURM_DIR"
node="$(hostname -s)"

running() {
  pid_alive "$D/munged.pid" && pid_alive "$D/slurmctld.pid" && pid_alive "$D/slurmd.pid" \
    && timeout 10 scontrol ping >/dev/null 2>&1
}

print_env() {
  echo "export SLURM_CONF=$JAXT_SLURM_CONF" | tee "$D/env"
}

if [ -f "$JAXT_SLURM_CONF" ] && running; then
  log "already running (state in $D)"
  print_env
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "the local SLURM runs its daemons as root (SlurmUser=root)"
"$here/setup.sh"
if [ -n "$(ls -A "$D" 2>/dev/null)" ]; then
  log "partial state in $D: stopping and wiping it first"
  "$here/down.sh"
fi

mkdir -p "$D"/{etc,log,gpu,spool/ctld,spool/d,munge}
chmod 755 "$D"

# munge: its own key and socket, so the host's munge (if any) is left alone.
chown munge:munge "$D/munge"
chmod 700 "$D/munge"
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$D/munge/munge.key"
chmod 400 "$D/munge/munge.key"
socket="$D/munge/munge.socket"
# The socket's directory must be reachable by every user (clients connect to it).
chmod 711 "$D/munge"
setsid setpriv --reuid=munge --regid=munge --init-groups \
  munged --foreground --socket="$socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" \
  </dev/null >>"$D/log/munged.out" 2>&1 &
echo $! >"$D/munged.pid"
for ((i = 0; i < 100; i++)); do [ -S "$socket" ] && break; sleep 0.1; done
munge --socket="$socket" -n | unmunge --socket="$socket" >/dev/null \
  || { cat "$D/log/munged.out" "$D/munge/munged.log" >&2 2>/dev/null; die "munged does not work"; }

# Fake GPUs: character devices like /dev/null, one per declared GPU.
for ((i = 0; i < JAXT_SLURM_GPUS; i++)); do
  [ -e "$D/gpu/nvidia$i" ] || cp -a /dev/null "$D/gpu/nvidia$i"
done
mem_mb="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"

cat >"$JAXT_SLURM_CONF" <<CONF
# Single-node SLURM of the jax-training tests (written by scripts/slurm/up.sh).
ClusterName=jaxtraining
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$JAXT_SLURMCTLD_PORT
SlurmdPort=$JAXT_SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$socket,cred_expire=$JAXT_SLURM_CRED_EXPIRE
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d
SlurmctldPidFile=$D/spool/slurmctld.pid
SlurmdPidFile=$D/spool/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
MailProg=/bin/true
MinJobAge=3600
SchedulerParameters=bf_interval=$JAXT_SLURM_BF_INTERVAL
FirstJobId=$JAXT_SLURM_FIRST_JOB_ID
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
ReturnToService=2
# Tasks that ignore SIGTERM get SIGKILL after KillWait seconds.
KillWait=5
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 CPUs=$JAXT_SLURM_CPUS RealMemory=$mem_mb Gres=gpu:$JAXT_SLURM_GPUS State=UNKNOWN
PartitionName=$JAXT_SLURM_PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$D/etc/gres.conf" <<CONF
NodeName=$node Name=gpu File=$D/gpu/nvidia[0-$((JAXT_SLURM_GPUS - 1))]
CONF

setsid slurmctld -D -f "$JAXT_SLURM_CONF" </dev/null >>"$D/log/slurmctld.out" 2>&1 &
echo $! >"$D/slurmctld.pid"
setsid slurmd -D -f "$JAXT_SLURM_CONF" </dev/null >>"$D/log/slurmd.out" 2>&1 &
echo $! >"$D/slurmd.pid"

# Bounded wait for the node to be schedulable.
state=""
for ((i = 0; i < 300; i++)); do
  state="$(timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null || true)"
  case "$state" in idle | mix | alloc) break ;; esac
  pid_alive "$D/slurmctld.pid" && pid_alive "$D/slurmd.pid" || break
  sleep 0.1
done
case "$state" in
  idle | mix | alloc) ;;
  *)
    tail -n 20 "$D"/log/*.log "$D"/log/*.out >&2 2>/dev/null || true
    die "node $node is not up (state '${state:-none}'); logs in $D/log"
    ;;
esac
if [ -n "$owner_pid" ]; then
  # The reaper: a detached loop that runs down.sh when the owner is gone (down.sh ends it otherwise).
  JAXT_SLURM_DIR="$D" setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; exec "$2"' \
    reaper "$owner_pid" "$here/down.sh" </dev/null >>"$D/log/reaper.out" 2>&1 &
  echo $! >"$D/reaper.pid"
fi
log "SLURM up: node $node ($JAXT_SLURM_CPUS CPUs, $JAXT_SLURM_GPUS fake GPUs), partition $JAXT_SLURM_PARTITION, state in $D"
print_env
