#!/usr/bin/env bash
# Installs the chart tooling, pinned and cached under $JAXT_CACHE (idempotent; a second run is a no-op):
#   helm v4 (stamped), kubeconform, kube-linter, yaml-decode — built from source through the Go module proxy
#   (`go install`; kube-linter through a wrapper module, see below) — and the offline schemas kubeconform validates against (core kinds from the kubernetes-validate
#   wheel, CRDs from ../shared/crds), and checkov from PyPI in a virtualenv of its own.
# Usage: scripts/tools.sh [helm]   (helm: helm alone, all a user needs; Go builds it)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

KUBECONFORM_VERSION=v0.7.0
KUBE_LINTER_VERSION=v0.8.3
ACTIONLINT_VERSION=v1.7.12
ZIZMOR_VERSION=1.32.0

# before anything is built: an unknown tool (or a second argument) is no request for everything
case "$#:${1:-}" in
  0: | 1:helm) ;;
  *) bad_usage "unknown argument: $* (usage: scripts/tools.sh [helm])" ;;
esac

go_tool helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
if [ "${1:-}" = helm ]; then
  log "helm ready in $JAXT_BIN: $("$JAXT_BIN/helm" version --short)"
  exit 0
fi
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" \
  "-X main.version=$KUBECONFORM_VERSION"

# The release workflow's linters: actionlint (Go) and zizmor (PyPI, in a virtualenv of its own).
go_tool actionlint github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION" \
  "-X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
install_zizmor() {
  local version="$1" dir="$JAXT_CACHE/tools/zizmor-$1"
  if [ ! -e "$dir/.installed" ]; then  # a venv stays where it was made: marked complete once installed
    log "installing zizmor $version (cached in $dir)"
    rm -rf "$dir"
    python3 -m venv "$dir" && "$dir/bin/pip" install -q "zizmor==$version" \
      || { rm -rf "$dir"; die "pip install zizmor==$version failed"; }
    touch "$dir/.installed"
  fi
  ln -sf "$dir/bin/zizmor" "$JAXT_BIN/zizmor"
}
install_zizmor "$ZIZMOR_VERSION"

# kube-linter's module path is golang.stackrox.io/kube-linter, a vanity host the module proxy here does
# not serve (403); the proxy does serve the same tagged source under github.com/stackrox/kube-linter.
# A throw-away wrapper module replaces the one by the other (its go.mod keeps the vanity path, which a
# replacement allows) and builds the pinned command, still entirely through the module proxy.
build_kube_linter() {
  local version="$1" dir="$JAXT_CACHE/tools/kube-linter-$1"
  if [ ! -x "$dir/kube-linter" ]; then
    command -v go >/dev/null || die "go is required to build kube-linter"
    log "building kube-linter $version (cached in $dir)"
    local work
    work="$(mktemp -d)"
    cat >"$work/go.mod" <<MOD
module jax-training.invalid/kube-linter-build

go 1.25.5

require golang.stackrox.io/kube-linter $version

replace golang.stackrox.io/kube-linter => github.com/stackrox/kube-linter $version
MOD
    mkdir -p "$dir.tmp"
    (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$dir.tmp/kube-linter" \
      -ldflags "-s -w -X golang.stackrox.io/kube-linter/internal/version.version=${version#v}" \
      golang.stackrox.io/kube-linter/cmd/kube-linter) || { rm -rf "$work"; die "building kube-linter $version failed"; }
    rm -rf "$work" "$dir" && mv "$dir.tmp" "$dir"
  fi
  ln -sf "$dir/kube-linter" "$JAXT_BIN/kube-linter"
}
build_kube_linter "$KUBE_LINTER_VERSION"

# yaml-decode (scripts/yaml-decode): the tests read renders with it the way kubectl, Helm and the API
# server's clients do. Built from its pinned go.mod/go.sum, again when its source changes.
build_yaml_decode() {
  local src="$JAXT_ROOT/scripts/yaml-decode" digest dir
  digest="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
  dir="$JAXT_CACHE/tools/yaml-decode-$digest"
  if [ ! -x "$dir/yaml-decode" ]; then
    command -v go >/dev/null || die "go is required to build yaml-decode"
    log "building yaml-decode (cached in $dir)"
    mkdir -p "$dir.tmp"
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.tmp/yaml-decode" .) \
      || die "building yaml-decode failed"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  ln -sf "$dir/yaml-decode" "$JAXT_BIN/yaml-decode"
}
build_yaml_decode

# checkov (tests/chart/test_checkov.py): from PyPI into a virtualenv of its own (its pins would fight
# the project's), once per version.
CHECKOV_VERSION=3.3.30
install_checkov() {
  local dir="$JAXT_CACHE/tools/checkov-$CHECKOV_VERSION"
  if [ ! -f "$dir/.installed" ]; then  # a venv's scripts name its path: built in place, marked when whole
    log "installing checkov $CHECKOV_VERSION (cached in $dir)"
    rm -rf "$dir"
    python3 -m venv "$dir" && "$dir/bin/pip" install --quiet --disable-pip-version-check \
      "checkov==$CHECKOV_VERSION" || { rm -rf "$dir"; die "installing checkov $CHECKOV_VERSION failed"; }
    touch "$dir/.installed"
  fi
  ln -sf "$dir/bin/checkov" "$JAXT_BIN/checkov"
}
install_checkov

# Offline schemas for kubeconform, rebuilt only when their inputs change (a stamp of their digests).
SCHEMA_DIR="$JAXT_CACHE/kubeconform-schemas"
CRDS_DIR="$(cd "$JAXT_ROOT/.." && pwd)/shared/crds"
PYTHON="$JAXT_VENV/bin/python"
[ -x "$PYTHON" ] || die "no venv with the test extras at $JAXT_VENV (run scripts/setup.sh dev first)"
read -r -a KUBERNETES_SCHEMA_VERSIONS < <(cd "$JAXT_ROOT" && "$PYTHON" -m generator.kubernetes_versions)
[ -d "$CRDS_DIR" ] || die "CRDs not found at $CRDS_DIR"
stamp="$( { "$PYTHON" -c 'import kubernetes_validate.version as v; print(v.__version__)'
            echo "${KUBERNETES_SCHEMA_VERSIONS[*]}"
            cat "$JAXT_ROOT/scripts/kubeconform-schemas.py" "$CRDS_DIR"/*.yaml; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$SCHEMA_DIR/.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "preparing kubeconform schemas in $SCHEMA_DIR"
  version_args=()
  for version in "${KUBERNETES_SCHEMA_VERSIONS[@]}"; do version_args+=(--kubernetes-version "$version"); done
  "$PYTHON" "$JAXT_ROOT/scripts/kubeconform-schemas.py" "$SCHEMA_DIR" "${version_args[@]}" --crds "$CRDS_DIR"
  echo "$stamp" >"$SCHEMA_DIR/.stamp"
fi

log "tools ready in $JAXT_BIN: $("$JAXT_BIN/helm" version --short), kubeconform $("$JAXT_BIN/kubeconform" -v), kube-linter $("$JAXT_BIN/kube-linter" version), checkov $CHECKOV_VERSION"
