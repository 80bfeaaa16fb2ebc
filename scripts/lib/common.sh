# Shared by the project's scripts: where cached tools live and how Go tools are built.
# Source it; it defines functions and variables only.

JAXT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JAXT_CACHE="${JAXT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jax-training}"
JAXT_BIN="$JAXT_CACHE/bin"
# The checkout's own virtualenv: another checkout's set-up never replaces the code this one runs.
JAXT_VENV="${JAXT_VENV:-$JAXT_ROOT/.venv}"
# The build folder prepare.sh writes and run.sh and clean.sh read when none is given: not build/,
# which setuptools writes (and jaxgen would refuse to replace a folder it did not make).
DEFAULT_BUILD_DIR=rendered
# The Helm the chart is tested with: tools.sh builds it; make install takes a Helm of its major or newer from PATH.
HELM_VERSION=v4.2.4
mkdir -p "$JAXT_BIN"

# project_python ARGS...: the checkout's Python environment, this checkout's packages first.
project_python() {
  [ -x "$JAXT_VENV/bin/python" ] || die "no Python environment at $JAXT_VENV (run scripts/setup.sh python)"
  PYTHONPATH="$JAXT_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$JAXT_VENV/bin/python" "$@"
}
# jaxgen ARGS...: the project's generator, from this checkout.
jaxgen() { project_python -m generator "$@"; }

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# A usage error (an unknown or bad option or argument): one line, as die's, and exit 2.
bad_usage() { log "error: $*"; exit 2; }
# need_value "$@" in an option's branch: its value follows, or a usage error names the option.
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || bad_usage "$1 needs a value"; }

# go_tool NAME MODULE/CMD VERSION [LDFLAGS]
# Builds `go install MODULE/CMD@VERSION` once into $JAXT_CACHE/tools/NAME-VERSION/ and links
# $JAXT_BIN/NAME to it. Idempotent: a cached binary is reused.
go_tool() {
  local name="$1" pkg="$2" version="$3" ldflags="${4:-}"
  local dir="$JAXT_CACHE/tools/$name-$version"
  if [ ! -x "$dir/$name" ]; then
    command -v go >/dev/null || die "Go is required to build $name: https://go.dev/doc/install"
    log "building $name $version (cached in $dir)"
    mkdir -p "$dir.tmp"
    GOBIN="$dir.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 \
      go install -ldflags "-s -w $ldflags" "$pkg@$version" || die "go install $pkg@$version failed"
    local built
    built="$(ls "$dir.tmp" | head -n1)"
    [ -n "$built" ] || die "go install $pkg@$version produced nothing"
    [ "$built" = "$name" ] || mv "$dir.tmp/$built" "$dir.tmp/$name"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  ln -sf "$dir/$name" "$JAXT_BIN/$name"
}

# apt_install PKG...: installs Debian packages (root), refreshing the package lists once on failure.
apt_install() {
  [ "$(id -u)" -eq 0 ] || die "installing $* needs root"
  command -v apt-get >/dev/null || die "apt-get not found: install $* by hand"
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "$@")
  if ! "${apt[@]}" >/dev/null; then
    log "apt-get install failed; refreshing the package lists once"
    apt-get update -q >/dev/null || die "apt-get update failed"
    "${apt[@]}" >/dev/null || die "apt-get install $* failed"
  fi
}
