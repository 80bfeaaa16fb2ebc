# Paths and settings of the project's local single-node SLURM. Source it (after lib/common.sh).
# The state lives outside the repo, in one fixed directory per user so up.sh/down.sh are idempotent;
# it is removed by down.sh.
JAXT_SLURM_DIR="${JAXT_SLURM_DIR:-${TMPDIR:-/tmp}/jax-training-slurm-$(id -u)}"
JAXT_SLURM_CONF="$JAXT_SLURM_DIR/etc/slurm.conf"
# Declared CPUs and fake GPUs of the node: more CPUs than the machine has let the GPU layouts
# (4 tasks x 1 GPU) fit for `sbatch --test-only`; nothing isolates the fake GPU device files.
JAXT_SLURM_CPUS="${JAXT_SLURM_CPUS:-8}"
JAXT_SLURM_GPUS="${JAXT_SLURM_GPUS:-4}"
JAXT_SLURM_PARTITION="${JAXT_SLURM_PARTITION:-debug}"
JAXT_SLURMCTLD_PORT="${JAXT_SLURMCTLD_PORT:-6817}"
JAXT_SLURMD_PORT="${JAXT_SLURMD_PORT:-6818}"
# The trainer's coordinator port is picked by SLURM_JOB_ID (trainer/cluster.py, SLURM_PORTS): two SLURMs on one machine should
# number their jobs apart so that concurrent jobs do not pick the same port.
JAXT_SLURM_FIRST_JOB_ID="${JAXT_SLURM_FIRST_JOB_ID:-1}"
# How soon a requeued job runs again, SLURM's defaults (what a site runs with): it pends (BeginTime)
# until the job step credentials' lifetime, AuthInfo=cred_expire, has passed, then for the next
# backfill pass, every SchedulerParameters=bf_interval seconds (no event starts a main pass then).
JAXT_SLURM_CRED_EXPIRE="${JAXT_SLURM_CRED_EXPIRE:-120}"
JAXT_SLURM_BF_INTERVAL="${JAXT_SLURM_BF_INTERVAL:-30}"
PATH="$PATH:/usr/sbin:/sbin"
export SLURM_CONF="$JAXT_SLURM_CONF"

# pid_alive PIDFILE: true when the file names a running process.
pid_alive() {
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# stop_pid PIDFILE NAME SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL.
stop_pid() {
  local file="$1" name="$2" wait_s="$3" pid i
  pid_alive "$file" || { rm -f "$file"; return 0; }
  pid="$(cat "$file")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < wait_s * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
    sleep 0.1
  done
  log "$name ($pid) did not stop in ${wait_s}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$file"
}
