# shellcheck shell=bash disable=SC2034
# Shared by run.sh and clean.sh: the kubectl connection options and the identity of a release.
# Source it after common.sh; it defines functions and variables only.

# Options every lifecycle script accepts; parse_kube_option consumes them.
KUBE_OPTIONS_HELP="  --kubeconfig FILE       kubeconfig to use (default: \$KUBECONFIG, then ~/.kube/config)
  --context NAME          kubeconfig context to use (default: the current one)
  -n, --namespace NS      namespace (default: the release's, from BUILD_DIR/release/release.env)"
kube_args=()
namespace_opt=""

# parse_kube_option "$@": if $1 is a connection option, records it and returns how many words it
# used (1 or 2) in KUBE_SHIFT; otherwise KUBE_SHIFT=0.
parse_kube_option() {
  KUBE_SHIFT=0
  case "$1" in
    --kubeconfig) need_value "$@"; kube_args+=(--kubeconfig "$2"); KUBE_SHIFT=2 ;;
    --kubeconfig=*) kube_args+=("$1"); KUBE_SHIFT=1 ;;
    --context) need_value "$@"; kube_args+=(--context "$2"); KUBE_SHIFT=2 ;;
    --context=*) kube_args+=("$1"); KUBE_SHIFT=1 ;;
    -n|--namespace) need_value "$@"; namespace_opt="$2"; KUBE_SHIFT=2 ;;
    --namespace=*) namespace_opt="${1#*=}"; KUBE_SHIFT=1 ;;
  esac
}

kube() { kubectl "${kube_args[@]}" --namespace "$NAMESPACE" "$@"; }

# require_cluster: returns when the API server of the chosen kubeconfig and context answers; else
# dies with one line naming the context and kubeconfig it tried (not kubectl's advice to apply
# without validation, which cannot help when there is no cluster).
require_cluster() {
  local err context="" config="" i
  err="$(kubectl "${kube_args[@]}" get --raw /version --request-timeout=15s 2>&1 >/dev/null)" && return 0
  for ((i = 0; i < ${#kube_args[@]}; i++)); do
    case "${kube_args[i]}" in
      --context) context="${kube_args[i + 1]}" ;;
      --context=*) context="${kube_args[i]#*=}" ;;
      --kubeconfig) config="${kube_args[i + 1]}" ;;
      --kubeconfig=*) config="${kube_args[i]#*=}" ;;
    esac
  done
  [ -n "$context" ] || context="$(kubectl "${kube_args[@]}" config current-context 2>/dev/null || true)"
  config="${config:-${KUBECONFIG:-$HOME/.kube/config}}"
  err="$(printf '%s\n' "$err" | sed -n '/./h; ${x;p}' | sed 's/; if you choose to ignore these errors.*//')"
  die "no reachable Kubernetes cluster: context ${context:-(none: current-context is not set)} of kubeconfig $config${err:+ ($err)}; choose one with --kubeconfig/--context (or KUBECONFIG), or run the build on this machine with run.sh --local"
}

# load_release BUILD_DIR: sets NAME, NAMESPACE, TARGET, HOSTS_COUNT from BUILD_DIR/release/release.env
# (written by prepare.sh); --namespace overrides NAMESPACE.
load_release() {
  local env="$1/release/release.env"
  [ -f "$env" ] || bad_usage "$env not found: prepare the build folder first (scripts/prepare.sh FILE -o $1)"
  NAME="" NAMESPACE="" TARGET="" HOSTS_COUNT=""
  # the target's facts (generator/targets.py Target.facts)
  KIND="" POD_SELECTOR="" INDEX_LABEL="" OWNER_LABEL="" OWNS_PODS="" SUCCEEDED="" CONTAINER="" CLEANUP_RESOURCES=""
  # shellcheck disable=SC1090
  source "$env"
  [ -n "$NAME" ] && [ -n "$TARGET" ] || bad_usage "$env: NAME and TARGET must be set"
  [ -z "$namespace_opt" ] || NAMESPACE="$namespace_opt"
  [ -n "$NAMESPACE" ] || NAMESPACE="$(current_namespace)"
}

current_namespace() {
  local ns
  ns="$(kubectl "${kube_args[@]}" config view --minify -o jsonpath='{..namespace}' 2>/dev/null || true)"
  echo "${ns:-default}"
}

# release_selector NAME: the selector of every object and pod of a release (generated).
source "$JAXT_ROOT/scripts/lib/contract.sh"
