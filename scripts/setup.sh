#!/usr/bin/env bash
# Set up everything the project needs, idempotently, cached outside the repository
# (${JAXT_CACHE:-~/.cache/jax-training}):
#   python   the virtualenv with jaxgen, the trainer and the test dependencies, and a wheelhouse of
#            the project's dependencies (the wheel test installs the built wheel from it, offline)
#   tools    helm, kubeconform, kube-linter (built with go install)
#   cluster  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok, CoreDNS,
#            the JobSet controller, the training-operator, the Kubeflow Trainer v2 controller and
#            Kueue, built from the Go module proxy
#   node     containerd, runc, CNI plugins, buildah, debootstrap from Debian's packages, and the
#            trainer image built from trainer/Dockerfile (the real-node e2e tier)
#   slurm    slurmctld, slurmd and munge from Debian's packages (e2e tier)
# Usage: scripts/setup.sh [python|tools|cluster|node|slurm|all]...   (default: all)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

setup_python() {
  local stamp="$JAXT_VENV/.jax-training-install" want
  want="$(cat "$JAXT_ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1) $JAXT_ROOT"
  if [ ! -x "$JAXT_VENV/bin/python" ]; then
    log "creating virtualenv $JAXT_VENV"
    python3 -m venv "$JAXT_VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing jax-training[test] into $JAXT_VENV"
    "$JAXT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$JAXT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$JAXT_ROOT[test]"
    log "collecting the wheels of jax-training[trainer]'s dependencies into $JAXT_CACHE/wheelhouse"
    # The requirements as installed (not the project itself: building it here would write build/).
    mapfile -t requirements < <("$JAXT_VENV/bin/python" -c '
import importlib.metadata as m, re
for r in m.requires("jax-training"):
    name, _, marker = r.partition(";")
    if not marker or re.search(r"extra == .trainer.", marker):
        print(name.strip())')
    "$JAXT_VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$JAXT_CACHE/wheelhouse" \
      "setuptools>=77" "${requirements[@]}"
    echo "$want" > "$stamp"
  fi
}

run_part() {
  case "$1" in
    python) setup_python ;;
    tools) "$JAXT_ROOT/scripts/tools.sh" ;;
    cluster) "$JAXT_ROOT/scripts/cluster/build.sh" ;;
    node) "$JAXT_ROOT/scripts/cluster/node-setup.sh" ;;
    slurm) "$JAXT_ROOT/scripts/slurm/setup.sh" ;;
    all) for part in python tools cluster node slurm; do run_part "$part"; done ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown part '$1' (python, tools, cluster, node, slurm, all)" ;;
  esac
}

[ $# -gt 0 ] || set -- all
for part in "$@"; do run_part "$part"; done
