#!/usr/bin/env bash
# Applies a build folder (scripts/prepare.sh) with server-side apply, waits for the job with a
# timeout while streaming rank 0's logs, and exits with the job's result.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$JAXT_ROOT/scripts/lib/release.sh"

usage() {
  cat <<EOF
Usage: scripts/run.sh [OPTIONS] [BUILD_DIR]
       scripts/run.sh --local [BUILD_DIR] [-- ARGS...]

Server-side applies the manifests of BUILD_DIR (written by scripts/prepare.sh; default: ./rendered),
waits until the job (the target's object) succeeds or fails, streams the logs
of rank 0 meanwhile, and exits with the job's result. Then it brings the job's results (summary,
metrics, model; not the checkpoints) from its bucket (outputs.uri, with this machine's S3
credentials) or its outputs claim (persistence) into
BUILD_DIR/results/NAME/<run id> (from a claim through a short-lived pod) (BUILD_DIR/results/NAME/latest: the newest
that succeeded; earlier runs are kept), and prints their summary (jaxgen results);
without a claim it prints rank 0's termination message, the one-line result. It follows the object it applied (by uid): if that
object is deleted or replaced while it waits, it says so and exits 1. A job that already finished
is not re-applied: run.sh refuses (exit 2) unless --replace deletes the previous run first. A queued
job that Kueue already admitted is followed as it runs, not re-applied (that would suspend it).
--local runs the same variables (BUILD_DIR/release/values.json) on this machine with
\`jaxgen run --local\` (ARGS are passed on) instead of on Kubernetes.

Options:
  --timeout SECONDS       give up waiting after this long (default: 3600)
  --replace               delete this release's previous objects (scripts/clean.sh) before applying
                          (required when the job already finished)
  --no-logs               do not stream rank 0's logs
  --no-check              do not run the preflight (jaxgen check) before applying
$KUBE_OPTIONS_HELP
  -h, --help              show this help

Before it applies, \`jaxgen check\` asks the cluster for what the build needs (the target's API and
controller, the namespace's admission, the queue, storage, GPUs, a published image); a problem is
one line each and nothing is applied.

Exit codes: 0 the job succeeded; 1 it failed (the failed indexes are named), was deleted, or its
image cannot be pulled; 2 bad usage (an unknown option, a folder scripts/prepare.sh did not write, a
SLURM build), the job already finished (use --replace) or the preflight found something missing;
124 the timeout expired (the job is left running; the pods' state is printed).
EOF
}

timeout=3600 replace=false logs=true check=true local_run=false build="" passthrough=()
while [ $# -gt 0 ]; do
  parse_kube_option "$@"
  if [ "$KUBE_SHIFT" -gt 0 ]; then shift "$KUBE_SHIFT"; continue; fi
  case "$1" in
    --timeout) need_value "$@"; timeout="$2"; shift ;;
    --replace) replace=true ;;
    --no-logs) logs=false ;;
    --no-check) check=false ;;
    --local) local_run=true ;;
    -h|--help) usage; exit 0 ;;
    --) shift; passthrough=("$@"); break ;;
    -*) usage >&2; bad_usage "unknown option $1" ;;
    *) [ -z "$build" ] || bad_usage "only one BUILD_DIR"; build="$1" ;;
  esac
  shift
done
[ -n "$build" ] || build="$DEFAULT_BUILD_DIR"
[[ "$timeout" =~ ^[1-9][0-9]{0,8}$ ]] || bad_usage "--timeout must be a whole number of seconds from 1 to 999999999"
[ -d "$build" ] || bad_usage "$build: no such build folder (scripts/prepare.sh FILE -o $build)"

if $local_run; then
  values="$build/release/values.json"
  [ -f "$values" ] || bad_usage "$values not found: prepare the build folder with scripts/prepare.sh"
  python="$JAXT_VENV/bin/python"
  [ -x "$python" ] || die "no Python environment at $JAXT_VENV (run scripts/setup.sh python)"
  # The results go to BUILD_DIR/results/<name>, where a cluster run brings them too.
  PYTHONPATH="$JAXT_ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m generator run --local "$values" \
    --outputs "$build/results" "${passthrough[@]}"
fi

load_release "$build"
# The target's facts (generator/targets.py), written by prepare.sh.
[ -n "$KIND" ] || bad_usage "$build: target $TARGET has no Kubernetes job for run.sh to drive (submit a SLURM script with sbatch; a build folder from an older version: run prepare.sh again)"
require_cluster
kind="$KIND" pods="$POD_SELECTOR" index_label="$INDEX_LABEL" ok="$SUCCEEDED"
what="$kind/$NAME in namespace $NAMESPACE"

conditions() {  # the types of the job's True conditions, space separated ("" while undecided)
  kube get "$kind" "$NAME" \
    -o go-template='{{range .status.conditions}}{{if eq .status "True"}}{{.type}} {{end}}{{end}}'
}
if $replace; then
  "$JAXT_ROOT/scripts/clean.sh" "${kube_args[@]}" --namespace "$NAMESPACE" "$build"
elif finished="$(conditions 2>/dev/null)" && [[ " $finished " =~ \ (Failed|$ok)\  ]]; then
  echo "error: $what already finished (${BASH_REMATCH[1]}); run.sh --replace $build deletes it and runs the build again" >&2
  exit 2
fi

# --- preflight: the cluster has what the build needs (jaxgen check), or nothing is applied
if $check; then
  checked=0
  jaxgen check "$build/release/values.json" "${kube_args[@]}" --namespace "$NAMESPACE" >/dev/null || checked=$?
  case "$checked" in
    0) ;;
    2) log "$what: nothing applied (jaxgen check, above, names what the cluster lacks; --no-check skips it)"; exit 2 ;;
    *) die "$what: the preflight (jaxgen check) could not ask the cluster; nothing applied" ;;
  esac
fi

# --- apply
apply_err="$(mktemp)"
tmp="$(mktemp -d)"
trap 'rm -rf "$apply_err" "$tmp"' EXIT
# Admission webhooks read from caches: one may not yet see an object applied a moment earlier in
# the same apply (a TrainJob's own TrainingRuntime) and deny the next. A denial is retried twice.
apply_build() {
  local try
  for try in 1 2 3; do
    kube apply --server-side --force-conflicts --field-manager jax-training -f "$build" 2>"$apply_err" && return 0
    grep -q "admission webhook .* denied the request" "$apply_err" && [ "$try" -lt 3 ] || return 1
    sleep 2
  done
}
# A queued job that Kueue admitted runs with suspend: false; applying the build again would set the
# build's suspend: true and stop its pods. It is followed as it is.
admitted="{{with .metadata.labels}}{{with index . \"$QUEUE_LABEL\"}}queued{{end}}{{end}} {{.spec.suspend}}"
if ! $replace && [ "$(kube get "$kind" "$NAME" --ignore-not-found -o go-template="$admitted" 2>/dev/null)" = "queued false" ]; then
  log "$what is queued and already admitted: following it (applying the build again would suspend it)"
elif log "applying $build ($TARGET, $HOSTS_COUNT hosts) to namespace $NAMESPACE" && ! apply_build; then
  sed 's/; if you choose to ignore these errors, turn validation off with --validate=false//' "$apply_err" >&2
  if grep -q "field is immutable" "$apply_err"; then
    die "$what already exists with a different spec; delete it first (scripts/clean.sh $build, or run.sh --replace)"
  fi
  die "kubectl apply failed"
fi

# The object just applied, by uid: a deleted or re-created job is not this run's.
uid="$(kube get "$kind" "$NAME" -o jsonpath='{.metadata.uid}')" || die "$what not found after apply"
# Pods of this object only (not of an earlier run under the same name): a Job's and a JAXJob's
# pods are owned by it; a JobSet's by its child Jobs, which label them with the JobSet's uid.
if [ -n "$OWNER_LABEL" ]; then
  pods+=",$OWNER_LABEL=$uid" own='{{if true}}'
elif [ "$OWNS_PODS" = true ]; then
  own="{{if and .metadata.ownerReferences (eq (index .metadata.ownerReferences 0).uid \"$uid\")}}"
else  # a runtime's pods (TrainJob): owned by objects it made, found by name only
  own='{{if true}}'
fi

# --- every state the object passes through, watched from now on: one that its ttlSecondsAfterFinished
# removes as soon as it finishes (0 s) is still seen finishing, where polling could miss it
state_template='{{.metadata.uid}} {{range .status.conditions}}{{if eq .status "True"}}{{.type}} {{end}}{{end}}'
watch_states() {  # the API server ends a watch after its request timeout (30 to 60 min): watch again
  local child=""
  trap 'kill "$child" 2>/dev/null; exit 0' TERM
  while kill -0 $$ 2>/dev/null; do  # not beyond run.sh itself, however it ended
    kubectl "${kube_args[@]}" --namespace "$NAMESPACE" get "$kind" "$NAME" --watch \
      -o go-template="$state_template{{\"\\n\"}}" 2>/dev/null &
    child=$!
    wait "$child" || true
    sleep 1
  done
}
watch_states >"$tmp/watch" &
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true; rm -rf "$apply_err" "$tmp"' EXIT
last_watched() {  # the conditions of this object's last state the watch saw
  local line
  line="$(grep "^$uid " "$tmp/watch" | tail -n1)" || true
  echo "${line#* }"
}

# --- rank 0's logs, in the background, until the job is decided
rank0_container() {  # "POD RESTARTS UID" of the newest started rank-0 pod, if any: its container restarts
  # in place on an Indexed Job (container restart rules), and a JAXJob's operator recreates a pod under
  # its old name: each is a new log to follow
  kube get pods -l "$pods,$index_label=0" --sort-by .metadata.creationTimestamp \
    -o go-template="{{range .items}}$own{{if ne .status.phase \"Pending\"}}{{.metadata.name}} {{range .status.containerStatuses}}{{if eq .name \"$CONTAINER\"}}{{.restartCount}}{{end}}{{end}} {{.metadata.uid}}{{\"\\n\"}}{{end}}{{end}}{{end}}" \
    2>/dev/null | tail -n1
}
rank0_pod() { rank0_container | cut -d' ' -f1; }
stream_logs() {
  local followed="" headed="" tries=0 container pod
  while [ ! -e "$tmp/done" ]; do
    container="$(rank0_container)" pod="${container%% *}"
    if [ -n "$pod" ] && [ "$container" != "$followed" ]; then
      followed="$container"
      echo "$pod" >"$tmp/followed"
      [ "$headed" = "$container" ] || { log "logs of rank 0 (pod $pod):"; headed="$container" tries=0; }
      # kubectl itself in the background (not the kube function), so its pid is the one to stop;
      # a copy of what it prints tells stop_logs whether it printed anything
      : >"$tmp/streamed"
      kubectl "${kube_args[@]}" --namespace "$NAMESPACE" logs -f "pod/$pod" -c "$CONTAINER" 2>"$tmp/logs.err" \
        > >(tee -a "$tmp/streamed") &
      echo $! >"$tmp/logs.pid"
      wait "$!" || [ -e "$tmp/done" ] || [ "$tries" -gt 0 ] ||
        log "warning: cannot stream the logs of $pod: $(tail -n1 "$tmp/logs.err")"
      rm -f "$tmp/logs.pid"
      # A stream that ended before printing a line (asked for as the container started, the node busy)
      # is asked for again, a few times: otherwise this container's log is left to the final fetch.
      [ -e "$tmp/done" ] || sleep 0.5  # tee's last write
      if [ ! -s "$tmp/streamed" ] && [ $((tries += 1)) -lt 5 ]; then followed=""; fi
    fi
    sleep 1
  done
}
stop_logs() {  # let the stream flush for up to 3 s after the verdict, then end it
  [ -n "${streamer:-}" ] || return 0
  touch "$tmp/done"
  for _ in $(seq 15); do
    [ -f "$tmp/logs.pid" ] && kill -0 "$(cat "$tmp/logs.pid" 2>/dev/null)" 2>/dev/null || break
    sleep 0.2
  done
  for _ in $(seq 25); do  # a stream may be starting right now: keep ending it until the loop exits
    kill -0 "$streamer" 2>/dev/null || break
    if [ -f "$tmp/logs.pid" ]; then kill "$(cat "$tmp/logs.pid" 2>/dev/null)" 2>/dev/null || true; fi
    sleep 0.2
  done
  kill "$streamer" 2>/dev/null || true
  wait "$streamer" 2>/dev/null || true
  streamer=""
  # A job decided before its rank 0 was seen running (a fast one): its log, once. So too when the
  # stream was ended before it printed a line (it had only just started): the log it missed.
  local pod
  if [ ! -s "$tmp/followed" ] && pod="$(rank0_pod)" && [ -n "$pod" ]; then
    log "logs of rank 0 (pod $pod):"
  elif [ -s "$tmp/followed" ] && [ ! -s "$tmp/streamed" ]; then
    pod="$(cat "$tmp/followed")"
  else
    return 0
  fi
  kubectl "${kube_args[@]}" --namespace "$NAMESPACE" logs "pod/$pod" -c "$CONTAINER" 2>"$tmp/logs.err" ||
    log "warning: no logs of $pod: $(tail -n1 "$tmp/logs.err")"
}
if $logs; then
  stream_logs &
  streamer=$!
  trap 'stop_logs; kill "$watcher" 2>/dev/null || true; rm -rf "$apply_err" "$tmp"' EXIT
fi

# --- wait for the job's verdict
failed_pods() {  # one line per failed pod: index, name, container exit code and reason
  kube get pods -l "$pods" -o go-template="{{range .items}}$own{{if eq .status.phase \"Failed\"}}index {{index .metadata.labels \"$index_label\"}} (pod {{.metadata.name}}{{range .status.containerStatuses}}{{if .state.terminated}}, container {{.name}} exit code {{.state.terminated.exitCode}} {{.state.terminated.reason}}{{end}}{{end}}){{\"\\n\"}}{{end}}{{end}}{{end}}"
}
log "waiting up to ${timeout}s for $what"
deadline=$((SECONDS + timeout))
verdict="" removed=false
while :; do
  if ! state="$(kube get "$kind" "$NAME" -o go-template="$state_template" 2>"$tmp/get.err")"; then
    if grep -q NotFound "$tmp/get.err"; then
      sleep 1  # the watch's last lines
      case " $(last_watched) " in  # finished, then removed by its ttlSecondsAfterFinished
        *" Failed "*) verdict=failed removed=true; break ;;
        *" $ok "*) verdict=succeeded removed=true; break ;;
      esac
      die "$what was deleted while waiting"
    fi
    log "warning: $(tail -n1 "$tmp/get.err")"
    state="$uid "
  fi
  [ "${state%% *}" = "$uid" ] || die "$what was deleted and created again (uid ${state%% *}, not $uid) while waiting: not this run's job"
  conds="${state#* }"
  case " $conds " in
    *" Failed "*) verdict=failed; break ;;
    *" $ok "*) verdict=succeeded; break ;;
  esac
  # An image that cannot be pulled never starts: say so now rather than at the timeout.
  unpullable="$(kube get pods -l "$pods" -o go-template="{{range .items}}$own{{range .status.containerStatuses}}{{with .state.waiting}}{{if or (eq .reason \"ErrImagePull\") (eq .reason \"ImagePullBackOff\") (eq .reason \"ErrImageNeverPull\") (eq .reason \"InvalidImageName\")}}{{.reason}}: {{.message}}{{\"\\n\"}}{{end}}{{end}}{{end}}{{end}}{{end}}" 2>/dev/null | sed -n 1p)"  # sed reads it all: head would SIGPIPE kubectl (exit 141 under pipefail)
  if [ -n "$unpullable" ]; then
    stop_logs
    log "$what cannot start: $unpullable"
    log "build the image with scripts/image.sh and push it to a registry the nodes reach (image.repository, image.tag), or import it into the nodes and set image.pull_policy Never; the job is left in place (scripts/clean.sh deletes it)"
    exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then verdict=timeout; break; fi
  sleep 2
done
stop_logs

# --- the job's results: from its bucket or its claim into BUILD_DIR/results/NAME/<run id> (as run.sh --local keeps them)
confined() { project_python -m generator.runstore.confined "$@"; }
fetch_results() {
  local manifest="$build/release/results-pod.json" dest="$build/results/$NAME" pod="$NAME-results" message
  if [ -n "${OUTPUTS_URI:-}" ]; then  # process 0 kept them in the job's bucket (outputs.uri)
    log "fetching the results from $OUTPUTS_URI into $dest"
    jaxgen results "$OUTPUTS_URI" ${OUTPUTS_ENDPOINT:+--endpoint "$OUTPUTS_ENDPOINT"} --into "$build/results" || true
    return 0
  fi
  if [ ! -f "$manifest" ]; then  # no claim: rank 0's termination message is all that is left
    message="$(kube get pods -l "$pods,$index_label=0" -o go-template="{{range .items}}$own{{range .status.containerStatuses}}{{with .state.terminated}}{{if .message}}{{.message}}{{\"\\n\"}}{{end}}{{end}}{{end}}{{end}}{{end}}" 2>/dev/null | sed -n '/./h; ${x;p}')"
    [ -z "$message" ] || log "rank 0: $message"
    log "the job's outputs were on an emptyDir and are gone with its pods (persistence.enabled=true keeps them)"
    return 0
  fi
  log "copying the results from the claim into $dest"
  kube delete pod "$pod" --ignore-not-found --wait=true >/dev/null 2>&1 || true
  if ! kube apply -f "$manifest" >/dev/null 2>"$tmp/results.err" ||
     ! kube wait --for=condition=Ready "pod/$pod" --timeout=180s >/dev/null 2>>"$tmp/results.err"; then
    log "warning: cannot start pod $pod to copy the results: $(tail -n1 "$tmp/results.err")"
    kube delete pod "$pod" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    return 0
  fi
  local part="$build/results/.$NAME.fetching"
  rm -rf "$part" && mkdir -p "$build/results"
  # Regular files and folders only: a link the job left in its outputs is never followed here
  # (generator/runstore/confined.py); what was left out is named in one line.
  local names left_out  # what only a restart reads (checkpoints, caches)
  if ! names="$(confined left-out)"; then
    log "warning: cannot copy the results: the names to leave out are unknown"
    kube delete pod "$pod" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    return 0
  fi
  read -ra left_out <<<"$names"
  if kube exec "$pod" -c results -- python -c "$(confined pack-script)" "/outputs/$NAME" "${left_out[@]}" \
       2>"$tmp/results.err" | confined extract "$part" --pod-log "$tmp/results.err" 2>"$tmp/extract.err"; then
    [ ! -s "$tmp/extract.err" ] || log "$(cat "$tmp/extract.err")"
    kube delete pod "$pod" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    # a run folder of its own beside the earlier runs' (DEST/<run id>, DEST/latest: generator/runstore/runs.py)
    jaxgen keep-run "$part" "$dest" --exit-code "$1" || true
  else
    log "warning: cannot copy the results from pod $pod: $(cat "$tmp/results.err" "$tmp/extract.err" | grep -v '^dropped: ' | tail -n1)"
    rm -rf "$part"
    kube delete pod "$pod" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
}

case "$verdict" in
  succeeded)
    log "$what succeeded ($HOSTS_COUNT hosts)$($removed && echo "; it was removed as it finished (ttl_seconds_after_finished)")"
    fetch_results 0
    exit 0 ;;
  failed)
    reason="$(kube get "$kind" "$NAME" -o go-template='{{range .status.conditions}}{{if and (eq .type "Failed") (eq .status "True")}}{{.reason}}: {{.message}}{{end}}{{end}}' 2>/dev/null)" ||
      reason="removed as it finished (ttl_seconds_after_finished)"
    failures="$(failed_pods)"
    log "$what FAILED (${reason:-no reason given})"
    if [ -n "$failures" ]; then
      while IFS= read -r line; do log "failed: $line"; done <<<"$failures"
      indexes="$(sed -E 's/^index ([^ ]*) .*/\1/' <<<"$failures" | sort -un | paste -sd, -)"
      log "failed index(es): $indexes"
    else
      log "no failed pod is left to name the failed index (they may have been deleted)"
    fi
    fetch_results 1
    exit 1 ;;
  timeout)
    log "timed out after ${timeout}s waiting for $what; it is left running. Pods:"
    kube get pods -l "$pods" -o wide >&2 || true
    log "recent events:"
    kube get events --sort-by .lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
    exit 124 ;;
esac
