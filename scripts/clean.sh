#!/usr/bin/env bash
# Deletes every object of a release (selected by its labels) and waits until they are gone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$JAXT_ROOT/scripts/lib/release.sh"

usage() {
  cat <<EOF
Usage: scripts/clean.sh [OPTIONS] [BUILD_DIR]
       scripts/clean.sh [OPTIONS] --name NAME

Deletes every object of the release (each kind a target creates, owners first, then PodMonitors,
Services, NetworkPolicies, Pods labelled $(release_selector NAME)) in its
namespace and waits until they are gone. BUILD_DIR defaults to ./rendered. With nothing deployed, or run twice, it succeeds and says so.
The PersistentVolumeClaim of the job's outputs (persistence.enabled) is kept, with the model,
metrics and checkpoints on it, unless --delete-outputs is given.

Options:
  --name NAME             the release's name, instead of reading it from BUILD_DIR
  --timeout SECONDS       how long to wait for the deletion (default: 300)
  --delete-outputs        also delete the outputs claim (the results and checkpoints on it are lost)
$KUBE_OPTIONS_HELP
  -h, --help              show this help

Exit codes: 0 the release's objects are gone (or there were none); 1 the cluster cannot be reached or
objects are still present after the timeout; 2 bad usage (an unknown option, a bad --name, a folder
scripts/prepare.sh did not write).
EOF
}

timeout=300 build="" name="" delete_outputs=false
while [ $# -gt 0 ]; do
  parse_kube_option "$@"
  if [ "$KUBE_SHIFT" -gt 0 ]; then shift "$KUBE_SHIFT"; continue; fi
  case "$1" in
    --name) need_value "$@"; name="$2"; shift ;;
    --timeout) need_value "$@"; timeout="$2"; shift ;;
    --delete-outputs) delete_outputs=true ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; bad_usage "unknown option $1" ;;
    *) [ -z "$build" ] || bad_usage "only one BUILD_DIR"; build="$1" ;;
  esac
  shift
done
[[ "$timeout" =~ ^[1-9][0-9]{0,8}$ ]] || bad_usage "--timeout must be a whole number of seconds from 1 to 999999999"
if [ -n "$name" ]; then
  [ -z "$build" ] || bad_usage "give BUILD_DIR or --name, not both"
  # A release's name is a DNS-1123 label (the variables' `name`); anything else would go into a label selector.
  [[ "$name" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] ||
    bad_usage "--name '$name' is not a release name (lowercase letters, digits and '-', at most 63)"
  NAME="$name"
  NAMESPACE="${namespace_opt:-$(current_namespace)}"
else
  [ -n "$build" ] || build="$DEFAULT_BUILD_DIR"
  load_release "$build"
fi
selector="$(release_selector "$NAME")"

# Owners first, so their controllers do not recreate what we delete; CRD kinds only if installed.
kinds=()
available="$(kubectl "${kube_args[@]}" api-resources -o name 2>/dev/null)" ||
  die "cannot reach the cluster (kubectl api-resources failed)"
# Every kind a target creates, owners first: from the build folder (release.env), or the target table.
[ -n "${CLEANUP_RESOURCES:-}" ] ||
  CLEANUP_RESOURCES="$(project_python -c 'from generator.targets import cleanup_resources; print(*cleanup_resources())')"
for k in $CLEANUP_RESOURCES; do
  grep -qx "$k" <<<"$available" && kinds+=("$k")
done
# The outputs claim goes last, and only when asked: the results on it are the user's.
claims="$(kube get persistentvolumeclaims -l "$selector" -o name | tr '\n' ' ')"
say_kept() {
  $delete_outputs || [ -z "$claims" ] ||
    log "kept ${claims% } (the job's outputs): --delete-outputs or kubectl delete -n $NAMESPACE ${claims% } removes it"
}
$delete_outputs && kinds+=(persistentvolumeclaims)
kinds_csv="$(IFS=,; echo "${kinds[*]}")"

found="$(kube get "$kinds_csv" -l "$selector" -o name)"
if [ -z "$found" ]; then
  log "nothing to delete: no object labelled $selector in namespace $NAMESPACE"
  say_kept
  exit 0
fi
log "deleting $(wc -l <<<"$found") object(s) of release $NAME in namespace $NAMESPACE"
# One kind at a time, each gone before the next: a TrainJob is finalized by its controller, which
# needs the job's TrainingRuntime while it does. In the background: an owner kept in foreground
# deletion is still reconciled by some controllers, which recreate what the garbage collector deletes
# (a TrainJob's JobSet, as kubernetes-sigs/jobset#561 was for a JobSet's Jobs), until the timeout.
# The later kinds delete what the collector has not yet (Jobs, pods, all labelled by the release).
for k in "${kinds[@]}"; do
  kube delete "$k" -l "$selector" --cascade=background --ignore-not-found --wait=true --timeout "${timeout}s" >&2
done
# Make sure no pod outlives its owners.
if ! kube wait --for=delete pods -l "$selector" --timeout "${timeout}s" >/dev/null 2>&1; then
  left="$(kube get "$kinds_csv" -l "$selector" -o name)"
  [ -z "$left" ] || die "still present after ${timeout}s: $(tr '\n' ' ' <<<"$left")"
fi
left="$(kube get "$kinds_csv" -l "$selector" -o name)"
[ -z "$left" ] || die "still present after deletion: $(tr '\n' ' ' <<<"$left")"
log "release $NAME deleted from namespace $NAMESPACE"
say_kept
