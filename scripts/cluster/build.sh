#!/usr/bin/env bash
# Builds (once, cached by version under $JAXT_CACHE/tools) every binary of the test control plane:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet, kwok, CoreDNS, the pod
# sandbox (pause) binary, the JobSet controller, the Kubeflow training-operator (JAXJob) and the
# Kubeflow Trainer v2 controller manager (TrainJob) with its TrainingRuntime CRD, and the Kueue
# controller manager with its CRDs. Idempotent: a
# second run only refreshes the links in $JAXT_BIN.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

usage() {
  cat <<EOF
Usage: scripts/cluster/build.sh [--core] [--help]

Builds the binaries of the local test control plane from the Go module proxy into
$JAXT_CACHE/tools/<name>-<version>/ and links them into $JAXT_BIN.

  --core   build only etcd, the Kubernetes control plane, the kubelet and kwok (skip CoreDNS,
           pause, the JobSet controller, the Kubeflow training-operator, Trainer v2 and Kueue)
EOF
}

core_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --core) core_only=true ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

cluster_dir="$JAXT_ROOT/scripts/cluster"

# One build at a time per cache (concurrent runs would share the .tmp directories).
mkdir -p "$JAXT_CACHE/tools"
exec 9>"$JAXT_CACHE/tools/.cluster-build.lock"
flock 9

# go_wrapper NAME MODULE_DIR VERSION LDFLAGS BIN=PKG...
# Builds the main packages PKG of the wrapper module MODULE_DIR in one `go build` into
# $JAXT_CACHE/tools/NAME-VERSION/BIN and links each BIN into $JAXT_BIN.
go_bin_name() {  # the file name `go build` gives a main package: the last element, minus /vN
  local pkg="$1"
  [[ "$(basename "$pkg")" =~ ^v[0-9]+$ ]] && pkg="$(dirname "$pkg")"
  basename "$pkg"
}
go_wrapper() {
  local name="$1" moddir="$2" version="$3" ldflags="$4"; shift 4
  local dir="$JAXT_CACHE/tools/$name-$version" spec missing=false pkgs=()
  for spec in "$@"; do
    pkgs+=("${spec#*=}")
    [ -x "$dir/${spec%%=*}" ] || missing=true
  done
  if $missing; then
    command -v go >/dev/null || die "go is required to build $name (https://go.dev/dl/)"
    log "building $name $version (cached in $dir; a cold build takes minutes)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$moddir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly nice go build -trimpath \
        -ldflags "-s -w $ldflags" -o "$dir.tmp/" "${pkgs[@]}") || die "building $name $version failed"
    for spec in "$@"; do
      local built
      built="$dir.tmp/$(go_bin_name "${spec#*=}")"
      [ -x "$built" ] || die "${spec#*=} was not built"
      [ "$built" = "$dir.tmp/${spec%%=*}" ] || mv "$built" "$dir.tmp/${spec%%=*}"
    done
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  for spec in "$@"; do ln -sf "$dir/${spec%%=*}" "$JAXT_BIN/${spec%%=*}"; done
}

k8s_minor="${K8S_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

go_wrapper etcd "$cluster_dir/etcd" "$ETCD_VERSION" \
  "" etcd=go.etcd.io/etcd/server/v3
go_wrapper kubernetes "$cluster_dir/kubernetes" "$K8S_VERSION" "$k8s_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubelet=k8s.io/kubernetes/cmd/kubelet
go_tool kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" \
  "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"

if ! $core_only; then
  # The real-node tier: cluster DNS and the pod sandbox process (its image is built locally).
  go_tool coredns github.com/coredns/coredns "$COREDNS_VERSION" \
    "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
  pause_sum="$(cat "$cluster_dir/pause/"* | sha256sum | cut -c1-12)"
  go_wrapper pause "$cluster_dir/pause" "$pause_sum" "" pause=jax-training/cluster/pause
  go_wrapper jobset-controller "$cluster_dir/jobset" "$JOBSET_VERSION" \
    "-X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION -X sigs.k8s.io/jobset/pkg/version.GitCommit=" \
    jobset-controller=sigs.k8s.io/jobset
  go_wrapper training-operator "$cluster_dir/training-operator" "$TRAINING_OPERATOR_VERSION" "" \
    training-operator=github.com/kubeflow/training-operator/cmd/training-operator.v1
  go_wrapper trainer "$cluster_dir/trainer" "$TRAINER_VERSION" "" \
    trainer-controller-manager=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
  # The controller watches TrainingRuntimes too, a CRD ../shared/crds lacks: take the release's own.
  trainer_crd="$JAXT_CACHE/tools/trainer-$TRAINER_VERSION/trainer.kubeflow.org_trainingruntimes.yaml"
  if [ ! -f "$trainer_crd" ]; then
    trainer_src="$(cd "$cluster_dir/trainer" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)"
    cp "$trainer_src/manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml" "$trainer_crd.tmp"
    mv "$trainer_crd.tmp" "$trainer_crd"
  fi
  go_wrapper kueue "$cluster_dir/kueue" "$KUEUE_VERSION" \
    "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=" \
    kueue=sigs.k8s.io/kueue/cmd/kueue
  # Kueue's CRDs, one file, from the release's own config/components/crd.
  kueue_crds="$JAXT_CACHE/tools/kueue-$KUEUE_VERSION/kueue-crds.yaml"
  if [ ! -f "$kueue_crds" ]; then
    kueue_src="$(cd "$cluster_dir/kueue" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
    for f in "$kueue_src"/config/components/crd/bases/*.yaml; do printf -- '---\n'; cat "$f"; done >"$kueue_crds.tmp"
    mv "$kueue_crds.tmp" "$kueue_crds"
  fi
fi
log "binaries ready in $JAXT_BIN"
