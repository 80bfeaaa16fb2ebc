#!/usr/bin/env bash
# Runs every test tier in three lanes at once:
#   slurm       tests/e2e_slurm: a real SLURM (no cgroups: it shares nothing with the kubelets)
#   kubernetes  tests/e2e_k8s and the kwok scale benchmark: control planes, the real nodes, mostly
#               waiting on controllers, kubelets and pods (one cluster at a time: they are host-wide)
#   rest        every other tier (unit, chart, generator, trainer, install): mostly CPU
# Each lane is one pytest session writing its own log; the logs are printed when every lane is done,
# with a progress line per lane every PROGRESS_SECONDS meanwhile.
# Usage: scripts/test.sh [--setup] [PYTEST ARGS...]   (the args go to every lane)
#   --setup  set up first, as `make test` does: the control plane's binaries, the node's packages
#            and the trainer image build in the background from the start; the Python environment,
#            the tools and SLURM in the foreground, after which the lanes start (the kubernetes
#            lane once the background set-up is done)
#   JAXT_TEST_LANES=1  one pytest session over everything, in order (no lanes; --setup sets up all first)
# Exit: 0 when every lane passes, else the first failing lane's pytest code (5: nothing collected), or
# the background set-up's code when it failed and every lane passed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$JAXT_ROOT"
PY="$JAXT_VENV/bin/python"
PROGRESS_SECONDS="${PROGRESS_SECONDS:-120}"

case "${1:-}" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
setup=false
if [ "${1:-}" = --setup ]; then setup=true; shift; fi

if [ "${JAXT_TEST_LANES:-3}" = 1 ]; then
  if $setup; then "$JAXT_ROOT/scripts/setup.sh" all; fi
  [ -x "$PY" ] || die "no virtualenv at $JAXT_VENV: run scripts/setup.sh all (or make test)"
  exec "$PY" -m pytest tests "$@"
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/jaxt-test.XXXXXX")"
pids=() setup_pid=""
stop_all() { for pid in "${pids[@]}" $setup_pid; do kill -TERM -- "-$pid" 2>/dev/null || true; done; }
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

if $setup; then
  # What only the kubernetes lane needs builds in the background from the start (Go, CPU), beside
  # the foreground set-up (pip, mostly downloads and unpacking; the tools) and then the lanes.
  setsid "$JAXT_ROOT/scripts/setup.sh" cluster node >"$logs/setup.log" 2>&1 </dev/null &
  setup_pid=$!
  log "background set-up: scripts/setup.sh cluster node (log: $logs/setup.log)"
  "$JAXT_ROOT/scripts/setup.sh" dev tools slurm || { stop_all; die "set-up failed (above)"; }
fi
[ -x "$PY" ] || { stop_all; die "no virtualenv at $JAXT_VENV: run scripts/setup.sh all (or make test)"; }

LANES=(slurm kubernetes rest)
SLURM_TIERS=(tests/e2e_slurm)
KUBERNETES_TIERS=(tests/e2e_k8s tests/benchmarks/test_kwok_scale.py)
REST=(tests)
for tier in "${SLURM_TIERS[@]}" "${KUBERNETES_TIERS[@]}"; do REST+=(--ignore "$tier"); done

start_lane() {  # NAME AFTER ARGS...: a pytest session in its own process group, its output in $logs/NAME.log,
  # started once process AFTER (if any) has ended
  local name="$1" after="$2"; shift 2
  # shellcheck disable=SC2016  # expanded by the lane's own shell
  setsid bash -c 'while [ -n "$1" ] && kill -0 "$1" 2>/dev/null; do sleep 2; done; shift; exec "$@"' lane \
    "$after" "$PY" -m pytest -p no:cacheprovider "$@" >"$logs/$name.log" 2>&1 </dev/null &
  pids+=("$!")
  log "lane $name: pytest $*${after:+, once the background set-up is done} (log: $logs/$name.log)"
}
for lane in "${LANES[@]}"; do  # in LANES' order: pids[i] is lane i's
  case "$lane" in
    slurm) start_lane slurm "" "${SLURM_TIERS[@]}" "$@" ;;
    # Its tests take the cluster binaries, the node's packages and the image as set up: on a new
    # machine, its first test's time limit would otherwise run out while they are still building.
    kubernetes) start_lane kubernetes "$setup_pid" "${KUBERNETES_TIERS[@]}" "$@" ;;
    rest) start_lane rest "" "${REST[@]}" "$@" ;;
  esac
done
started=$SECONDS
running() { local pid; for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
while running; do
  sleep 5
  if [ -n "$setup_pid" ] && [ -z "${setup_done:-}" ] && ! kill -0 "$setup_pid" 2>/dev/null; then
    setup_done=1
    log "background set-up done after $(( (SECONDS - started) / 60 )) min of tests: $(tail -n1 "$logs/setup.log")"
  fi
  if (( (SECONDS - started) % PROGRESS_SECONDS < 5 )); then
    for i in "${!LANES[@]}"; do
      kill -0 "${pids[$i]}" 2>/dev/null || continue
      log "lane ${LANES[$i]}, $(( (SECONDS - started) / 60 )) min: $(tail -c 300 "$logs/${LANES[$i]}.log" | tr '\r' '\n' | grep -v '^$' | tail -n1 | cut -c1-100)"
    done
  fi
done
codes=()
for pid in "${pids[@]}"; do wait "$pid"; codes+=("$?"); done
setup_code=0
if [ -n "$setup_pid" ]; then
  wait "$setup_pid"; setup_code=$?
  printf '\n===== background set-up (exit %s) =====\n' "$setup_code"
  cat "$logs/setup.log"
fi

rc=0 summary=()
for i in "${!LANES[@]}"; do
  printf '\n===== lane %s (pytest exit %s) =====\n' "${LANES[$i]}" "${codes[$i]}"
  cat "$logs/${LANES[$i]}.log"
  [ "$rc" != 0 ] || rc="${codes[$i]}"
  summary+=("${LANES[$i]} exit ${codes[$i]}")
done
[ "$rc" != 0 ] || rc="$setup_code"
log "every lane done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s: $(IFS=,; echo "${summary[*]}" | sed 's/,/, /g')"
rm -rf "$logs"
exit "$rc"
