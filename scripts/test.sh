#!/usr/bin/env bash
# Runs every test tier (make test, after scripts/setup.sh all) in two lanes at once:
#   engines  tests/e2e_k8s, tests/e2e_slurm and the kwok scale benchmark: control planes, the real
#            node and SLURM, mostly waiting on controllers, kubelets and pods
#   rest     every other tier (unit, chart, generator, trainer, install): mostly CPU
# Each lane is one pytest session writing its own log; both logs are printed when both are done,
# with a progress line per lane every PROGRESS_SECONDS meanwhile.
# Usage: scripts/test.sh [PYTEST ARGS...]   (the args go to both lanes)
#   JAXT_TEST_LANES=1  one pytest session over everything, in order (no lanes)
# Exit: 0 when both lanes pass, else the first failing lane's pytest code (5: nothing collected).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$JAXT_ROOT"
PY="$JAXT_VENV/bin/python"
PROGRESS_SECONDS="${PROGRESS_SECONDS:-120}"

case "${1:-}" in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ -x "$PY" ] || die "no virtualenv at $JAXT_VENV: run scripts/setup.sh all (or make test)"

if [ "${JAXT_TEST_LANES:-2}" = 1 ]; then
  exec "$PY" -m pytest tests "$@"
fi

ENGINE_TIERS=(tests/e2e_k8s tests/e2e_slurm tests/benchmarks/test_kwok_scale.py)
REST=(tests)
for tier in "${ENGINE_TIERS[@]}"; do REST+=(--ignore "$tier"); done

logs="$(mktemp -d "${TMPDIR:-/tmp}/jaxt-test.XXXXXX")"
pids=()
stop_lanes() { for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done; }
trap 'stop_lanes; exit 130' INT
trap 'stop_lanes; exit 143' TERM

start_lane() {  # NAME ARGS...: a pytest session in its own process group, its output in $logs/NAME.log
  local name="$1"; shift
  setsid "$PY" -m pytest -p no:cacheprovider "$@" >"$logs/$name.log" 2>&1 </dev/null &
  pids+=("$!")
  log "lane $name: pytest $* (log: $logs/$name.log)"
}
start_lane engines "${ENGINE_TIERS[@]}" "$@"
start_lane rest "${REST[@]}" "$@"

started=$SECONDS
while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
  sleep 5
  if (( (SECONDS - started) % PROGRESS_SECONDS < 5 )); then
    for name in engines rest; do
      log "lane $name, $(( (SECONDS - started) / 60 )) min: $(tail -c 300 "$logs/$name.log" | tr '\r' '\n' | grep -v '^$' | tail -n1 | cut -c1-100)"
    done
  fi
done
codes=()
for pid in "${pids[@]}"; do wait "$pid"; codes+=("$?"); done

rc=0
for i in 0 1; do
  name=$([ "$i" = 0 ] && echo engines || echo rest)
  printf '\n===== lane %s (pytest exit %s) =====\n' "$name" "${codes[$i]}"
  cat "$logs/$name.log"
  [ "$rc" != 0 ] || rc="${codes[$i]}"
done
log "both lanes done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s: engines exit ${codes[0]}, rest exit ${codes[1]}"
rm -rf "$logs"
exit "$rc"
