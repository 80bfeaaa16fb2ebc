#!/usr/bin/env bash
# Validates a variables file and renders its manifests into a build folder for run.sh / clean.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
DEFAULT_VARIABLES="$JAXT_ROOT/variables/examples/cpu-local.json"

usage() {
  cat <<'EOF'
Usage: scripts/prepare.sh [-o BUILD_DIR] [-f FILE]... [--set KEY.PATH=VALUE]... [--target T] [-n NS] [VARIABLES_FILE]

Validates VARIABLES_FILE (default: variables/examples/cpu-local.json of this repository) (merged over charts/jax-training/values.yaml, then the -f files and
--set overrides, in order) and renders its manifests into BUILD_DIR (default: ./build), one file
per object, plus BUILD_DIR/release/ (a subfolder, so `kubectl apply -f BUILD_DIR` skips it):
  values.json   the merged variables (scripts/run.sh --local runs exactly these)
  release.env   NAME, NAMESPACE, TARGET, HOSTS_COUNT of the release (read by run.sh, clean.sh)
Invalid input: every problem is printed with its JSON path, nothing is written, exit code 2.

  -o, --output-dir DIR    build folder (replaced as a whole; default: ./build)
  -f, --values FILE       more variables files, merged after VARIABLES_FILE (later wins)
  --set KEY.PATH=VALUE    override one variable (VALUE read as YAML), e.g. --set hosts_count=4
  --target T              indexed-job, jaxjob, jobset, trainjob or slurm (overrides the file's target)
  -n, --namespace NS      the release's namespace, used where the variables leave namespace empty
                          (default: kubectl's current namespace, else default; as helm does)
EOF
}

out="build" file="" namespace="" jaxgen_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output-dir) out="${2:?$1 needs a value}"; shift ;;
    -f|--values) jaxgen_args+=(-f "${2:?$1 needs a value}"); shift ;;
    --set) jaxgen_args+=(--set "${2:?--set needs a value}"); shift ;;
    --target) jaxgen_args+=(--target "${2:?--target needs a value}"); shift ;;
    -n|--namespace) namespace="${2:?$1 needs a value}"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) [ "$1" = "-" ] || { usage >&2; echo "error: unknown option $1" >&2; exit 2; }
        [ -z "$file" ] || { echo "error: only one VARIABLES_FILE (use -f for more)" >&2; exit 2; }
        file="$1" ;;
    *) [ -z "$file" ] || { echo "error: only one VARIABLES_FILE (use -f for more)" >&2; exit 2; }
       file="$1" ;;
  esac
  shift
done
[ -n "$file" ] || file="$DEFAULT_VARIABLES"
[ "$file" = "-" ] && { echo "error: prepare.sh needs a file, not stdin (it reads it twice)" >&2; exit 2; }

python="$JAXT_VENV/bin/python"
[ -x "$python" ] || die "no Python environment at $JAXT_VENV (run scripts/setup.sh python)"
# The project's generator: the installed jaxgen, or the package of this checkout.
jaxgen() { PYTHONPATH="$JAXT_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$python" -m generator "$@"; }

if [ -z "$namespace" ] && command -v kubectl >/dev/null; then
  namespace="$(kubectl config view --minify -o jsonpath='{..namespace}' 2>/dev/null || true)"
fi
jaxgen_args+=(--namespace "${namespace:-default}")

jaxgen render "$file" "${jaxgen_args[@]}" -o "$out"
rendered=0
for f in "$out"/*.yaml "$out"/*.json "$out"/*.sbatch; do [ -f "$f" ] && rendered=$((rendered + 1)); done

# The merged variables and the release's identity, beside the manifests.
PYTHONPATH="$JAXT_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$python" - "$out" "$file" "${jaxgen_args[@]}" <<'EOF'
import json, shlex, sys
from pathlib import Path
from generator.results import results_pod
from generator.targets import target as target_of
from generator.values import load_values

out, files, sets, target, namespace = Path(sys.argv[1]), [sys.argv[2]], [], None, None
args = iter(sys.argv[3:])
for flag in args:
    value = next(args)
    if flag == "-f":
        files.append(value)
    elif flag == "--set":
        sets.append(value)
    elif flag == "--namespace":
        namespace = value
    else:
        target = value
values = load_values(files, sets, target, namespace)
(out / "release").mkdir(exist_ok=True)
(out / "release" / "values.json").write_text(json.dumps(values, indent=2) + "\n")
release = {"NAME": values["name"], "NAMESPACE": values["namespace"], "TARGET": values["target"],
           "HOSTS_COUNT": values["hosts_count"], **target_of(values).facts(values["name"])}
pod = results_pod(values) if target_of(values).kubernetes else None
if pod:  # run.sh copies the results from the claim through it (release/ is not applied with the job)
    (out / "release" / "results-pod.json").write_text(json.dumps(pod, indent=2) + "\n")
(out / "release" / "release.env").write_text("".join(f"{k}={shlex.quote(str(v))}\n" for k, v in release.items()))
EOF
log "valid; rendered $rendered file(s) into $out"
