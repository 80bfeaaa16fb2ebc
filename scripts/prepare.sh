#!/usr/bin/env bash
# Validates a variables file and renders its manifests into a build folder for run.sh / clean.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
DEFAULT_VARIABLES="$JAXT_ROOT/variables/examples/cpu-local.json"

usage() {
  cat <<'EOF'
Usage: scripts/prepare.sh [-o BUILD_DIR] [-f FILE]... [--set[-string|-json] KEY.PATH=VALUE]... [--target T] [-n NS]
                          [VARIABLES_FILE]

Validates VARIABLES_FILE (- or /dev/stdin: standard input, read once; default:
variables/examples/cpu-local.json of this repository) (merged over charts/jax-training/values.yaml, then the -f files and
--set overrides, in order) and renders its manifests into BUILD_DIR (default: ./rendered), one file
per object, plus BUILD_DIR/release/ (a subfolder, so `kubectl apply -f BUILD_DIR` skips it):
  values.json   the merged variables (scripts/run.sh --local runs exactly these)
  release.env   NAME, NAMESPACE, TARGET, HOSTS_COUNT of the release and where its outputs are
                (OUTPUTS_DIR, OUTPUTS_URI) (read by run.sh, clean.sh)
Invalid input: every problem is printed with its JSON path, nothing is written, exit code 2.

  -o, --output-dir DIR    build folder (default: ./rendered); the previous render in it is replaced
                          as a whole, what it did not write (results/: every earlier run's) is kept
  -f, --values FILE       more variables files, merged after VARIABLES_FILE (later wins)
  --set KEY.PATH=VALUE    override variables as helm --set does, e.g. --set hosts_count=4,name=big
  --set-string, --set-json
                          the same with string or JSON values, as helm's options of those names
  --target T              a target of the table in charts/jax-training/README.md#targets
                          (overrides the file's target)
  -n, --namespace NS      the release's namespace, used where the variables leave namespace empty
                          (default: the kube context's namespace, else default; as helm template and
                          jaxgen render take it)
EOF
}

out="$DEFAULT_BUILD_DIR" file="" namespace="" jaxgen_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output-dir) need_value "$@"; out="$2"; shift ;;
    -f|--values) need_value "$@"; jaxgen_args+=(-f "$2"); shift ;;
    --set|--set-string|--set-json) need_value "$@"; jaxgen_args+=("$1" "$2"); shift ;;
    --target) need_value "$@"; jaxgen_args+=(--target "$2"); shift ;;
    -n|--namespace) need_value "$@"; namespace="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) [ "$1" = "-" ] || { usage >&2; bad_usage "unknown option $1"; }
        [ -z "$file" ] || bad_usage "only one VARIABLES_FILE (use -f for more)"
        file="$1" ;;
    *) [ -z "$file" ] || bad_usage "only one VARIABLES_FILE (use -f for more)"
       file="$1" ;;
  esac
  shift
done
[ -n "$file" ] || file="$DEFAULT_VARIABLES"

[ -x "$JAXT_VENV/bin/python" ] || die "no Python environment at $JAXT_VENV (run scripts/setup.sh python)"

[ -z "$namespace" ] || jaxgen_args+=(--namespace "$namespace")  # else jaxgen takes the kube context's

# One reading of the variables (a pipe or /dev/stdin can be read once) renders the manifests and
# the release's files (release/: not applied with the job), all written or none.
jaxgen render "$file" "${jaxgen_args[@]}" -o "$out" --release  # says what it wrote
# A tag that may move, pulled IfNotPresent: the nodes may run an older build under that name.
[ ! -f "$out/release/values.json" ] ||
  (values="$(realpath "$out/release/values.json")" && cd "$JAXT_ROOT" && "$JAXT_VENV/bin/python" -m generator.images --warn "$values")
