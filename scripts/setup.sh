#!/usr/bin/env bash
# Set up everything the project needs, idempotently. The Python environment belongs to the checkout
# (./.venv, or $JAXT_VENV); what is keyed by its content (Go tools, the wheelhouse, images, pip's
# cache) is shared between checkouts in ${JAXT_CACHE:-~/.cache/jax-training}:
#   demo     the virtualenv with jaxgen and the trainer: what `make demo` needs (the trainer and plot extras)
#   python   demo plus the s3 extra, with which run.sh and jaxgen results fetch a job's results from its bucket
#   dev      python plus the test dependencies, and a wheelhouse of the project's dependencies (the
#            wheel test installs the built wheel from it, offline)
#   helm     helm alone (built with go install: needs Go)
#   install  python, then jaxgen, jax-trainer and a helm on PATH through $BINDIR (~/.local/bin): make install
#   tools    helm, kubeconform, kube-linter (built with go install)
#   cluster  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok, CoreDNS,
#            the JobSet controller, the training-operator, the Kubeflow Trainer v2 controller and
#            Kueue, built from the Go module proxy
#   node     containerd, runc, CNI plugins, buildah, debootstrap from Debian's packages, and the
#            trainer image built from trainer/Dockerfile (the real-node e2e tier)
#   slurm    slurmctld, slurmd and munge from Debian's packages (e2e tier)
# Usage: scripts/setup.sh [demo|python|dev|helm|install|tools|cluster|node|slurm|all]...   (default: all)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
CONSTRAINTS="$JAXT_ROOT/trainer/constraints.txt"  # the pinned versions of the trainer's dependencies

# setup_python EXTRAS: an editable install of this checkout with EXTRAS (trainer,plot; trainer,plot,s3; or
# test) into $JAXT_VENV, at the versions of trainer/constraints.txt, redone when pyproject.toml, the
# constraints or the checkout change, or when EXTRAS asks for one the venv lacks (the test extra has all).
setup_python() {
  local extras="$1" stamp="$JAXT_VENV/.jax-training-install" key have installed extra
  key="$(cat "$JAXT_ROOT/pyproject.toml" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1) $JAXT_ROOT"
  have="$(cat "$stamp" 2>/dev/null || true)"
  if [ "${have% *}" = "$key" ]; then
    installed="${have##* }"
    [ "$installed" = test ] && return 0
    for extra in ${extras//,/ }; do
      case ",$installed," in *",$extra,"*) ;; *) installed="$installed,$extra" ;; esac
    done
    [ "$installed" = "${have##* }" ] && return 0
    extras="$installed"  # what the venv has plus what is asked: an install never takes an extra away
  fi
  if [ ! -x "$JAXT_VENV/bin/python" ]; then
    log "creating virtualenv $JAXT_VENV"
    python3 -m venv "$JAXT_VENV"
  fi
  log "installing jax-training[$extras] into $JAXT_VENV"
  # The venv's own pip (Python 3.11's installs editables): upgrading it first costs seconds and buys nothing
  # here. --no-compile: byte-compiling every installed module (jax, scipy, matplotlib) is two thirds of the
  # install's CPU time, and Python compiles the modules a command imports on first use anyway.
  "$JAXT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -c "$CONSTRAINTS" \
    -e "$JAXT_ROOT[$extras]"
  echo "$key $extras" >"$stamp"
}

# The wheels of jax-training[trainer,plot,s3]'s dependencies, for the offline installs of the wheel and
# checkout tests (once per pyproject.toml).
fill_wheelhouse() {
  local stamp="$JAXT_VENV/.jax-training-wheelhouse" key
  key="$(cat "$JAXT_ROOT/pyproject.toml" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
  [ "$(cat "$stamp" 2>/dev/null || true)" = "$key" ] && return 0
  log "collecting the wheels of jax-training[trainer,plot,s3]'s dependencies into $JAXT_CACHE/wheelhouse"
  # The requirements as installed (not the project itself: building it here would write build/).
  local requirements
  mapfile -t requirements < <("$JAXT_VENV/bin/python" -c '
import importlib.metadata as m, re
for r in m.requires("jax-training"):
    name, _, marker = r.partition(";")
    if not marker or re.search(r"extra == .(trainer|plot|s3).", marker):
        print(name.strip())')
  "$JAXT_VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$JAXT_CACHE/wheelhouse" \
    -c "$CONSTRAINTS" "setuptools>=77" "${requirements[@]}"
  echo "$key" >"$stamp"
}

# install_commands: jaxgen and jax-trainer linked into $BINDIR, and a helm: the one on PATH when its major
# version is the tested one's or newer (left where it is), else the pinned one, linked there (built with Go
# once, about 10 minutes). Whatever helm lacks (Go, a build that failed), it says so and returns 0: the
# other two are linked.
install_commands() {
  local bindir="${BINDIR:-$HOME/.local/bin}" tested="${HELM_VERSION%%.*}" found version
  mkdir -p "$bindir"
  ln -sfn "$JAXT_VENV/bin/jaxgen" "$bindir/jaxgen"
  ln -sfn "$JAXT_VENV/bin/jax-trainer" "$bindir/jax-trainer"
  log "jaxgen and jax-trainer are in $bindir"
  case ":$PATH:" in *":$bindir:"*) ;; *) log "$bindir is not on PATH: export PATH=\"$bindir:\$PATH\"" ;; esac
  if found="$(command -v helm)"; then
    version="$("$found" version --short 2>/dev/null | head -n1 || true)"
    if [[ "$version" =~ ^v([0-9]{1,4})\. ]] && [ "${BASH_REMATCH[1]}" -ge "${tested#v}" ]; then
      log "helm: $found ($version) is used, as Helm $tested or newer; nothing to build"
      return 0
    fi
    log "helm: $found is ${version:-of no version it says}, not Helm $tested or newer:" \
      "the tested $HELM_VERSION goes in $bindir"
  fi
  if [ ! -x "$JAXT_CACHE/tools/helm-$HELM_VERSION/helm" ]; then
    if ! command -v go >/dev/null; then
      log "helm is not in $bindir: Go builds the tested $HELM_VERSION (https://go.dev/doc/install; then rerun" \
        "make install), or put a Helm $tested or newer on PATH"
      return 0
    fi
    log "building helm $HELM_VERSION with Go, once: about 10 minutes (cached in $JAXT_CACHE)"
  fi
  if "$JAXT_ROOT/scripts/tools.sh" helm; then
    ln -sfn "$JAXT_BIN/helm" "$bindir/helm"
    log "helm $HELM_VERSION is in $bindir"
  else
    log "helm is not in $bindir: its build failed (above); rerun make install once that is fixed"
  fi
}

run_part() {
  case "$1" in
    demo) setup_python trainer,plot ;;
    python) setup_python trainer,plot,s3 ;;
    dev) setup_python test && fill_wheelhouse ;;
    helm) "$JAXT_ROOT/scripts/tools.sh" helm ;;
    install) setup_python trainer,plot,s3 && install_commands ;;
    tools) "$JAXT_ROOT/scripts/tools.sh" ;;
    cluster) "$JAXT_ROOT/scripts/cluster/build.sh" ;;
    node) "$JAXT_ROOT/scripts/cluster/node-setup.sh" ;;
    slurm) "$JAXT_ROOT/scripts/slurm/setup.sh" ;;
    all) for part in dev tools cluster node slurm; do run_part "$part"; done ;;
  esac
}

[ $# -gt 0 ] || set -- all
# Every part is known before any is set up (some take minutes).
for part in "$@"; do
  case "$part" in
    demo|python|dev|helm|install|tools|cluster|node|slurm|all) ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bad_usage "unknown part '$part' (demo, python, dev, helm, install, tools, cluster, node, slurm, all)" ;;
  esac
done
for part in "$@"; do run_part "$part"; done
