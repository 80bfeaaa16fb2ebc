#!/usr/bin/env bash
# Builds (once, cached by the pins of its wrapper module under $JAXT_CACHE/tools) every binary of the
# test control plane: etcd (scripts/cluster/etcd), the pod sandbox (pause) binary
# (scripts/cluster/pause), and from the one control-plane module (scripts/cluster/controlplane)
# kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet, kwok, CoreDNS, kube-proxy, the JobSet
# controller, the Kubeflow training-operator (JAXJob), the Kubeflow Trainer v2 controller manager
# (TrainJob) with its TrainingRuntime CRD, the Kueue controller manager with its CRDs, and kube-router
# (scripts/cluster/kube-router: the real nodes' NetworkPolicy firewall).
# Idempotent: a second run only refreshes the links in $JAXT_BIN.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

usage() {
  cat <<EOF
Usage: scripts/cluster/build.sh [--core] [--help]

Builds the binaries of the local test control plane from the Go module proxy into
$JAXT_CACHE/tools/<name>-<version>/ and links them into $JAXT_BIN.

  --core   build only etcd, the Kubernetes control plane, the kubelet and kwok (skip CoreDNS,
           kube-proxy, pause, kube-router, the JobSet controller, the Kubeflow training-operator, Trainer v2
           and Kueue)
EOF
}

core_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --core) core_only=true ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; bad_usage "unknown argument: $1" ;;
  esac
  shift
done

cluster_dir="$JAXT_ROOT/scripts/cluster"

# One build at a time per cache (concurrent runs would share the .tmp directories).
mkdir -p "$JAXT_CACHE/tools"
exec 9>"$JAXT_CACHE/tools/.cluster-build.lock"
flock 9

go_bin_name() {  # the file name `go build` gives a main package: the last element, minus /vN
  local pkg="$1"
  [[ "$(basename "$pkg")" =~ ^v[0-9]+$ ]] && pkg="$(dirname "$pkg")"
  basename "$pkg"
}

# go_module NAME MODULE_DIR LDFLAGS BIN=PKG...
# Builds the missing BINs (main packages PKG of the wrapper module MODULE_DIR) in one `go build` into
# $JAXT_CACHE/tools/NAME-<digest of the module's files>/ and links each BIN into $JAXT_BIN. The digest
# keys the binaries by every pinned version, so a changed go.mod or go.sum builds them anew.
go_module() {
  local name="$1" moddir="$2" ldflags="$3"; shift 3
  local digest dir spec pkgs=() wanted=()
  digest="$(cd "$moddir" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"
  dir="$JAXT_CACHE/tools/$name-$digest"
  for spec in "$@"; do
    [ -x "$dir/${spec%%=*}" ] && continue
    pkgs+=("${spec#*=}")
    wanted+=("$spec")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    command -v go >/dev/null || die "go is required to build ${wanted[*]%%=*} (https://go.dev/dl/)"
    log "building ${wanted[*]%%=*} from $moddir/go.mod (cached in $dir; a cold build takes minutes)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" "$dir"
    (cd "$moddir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
        -ldflags "-s -w $ldflags" -o "$dir.tmp/" "${pkgs[@]}") || die "building ${wanted[*]%%=*} failed"
    for spec in "${wanted[@]}"; do
      local built
      built="$dir.tmp/$(go_bin_name "${spec#*=}")"
      [ -x "$built" ] || die "${spec#*=} was not built"
      mv "$built" "$dir/${spec%%=*}"
    done
    rm -rf "$dir.tmp"
  fi
  for spec in "$@"; do ln -sf "$dir/${spec%%=*}" "$JAXT_BIN/${spec%%=*}"; done
}

k8s_minor="${K8S_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

# etcd has a module of its own: its server needs the etcd client of its release, older than the
# one the control plane's other binaries share.
go_module etcd "$cluster_dir/etcd" "" etcd=go.etcd.io/etcd/server/v3
# Every other binary comes from the one control-plane module, in groups only by their version
# stamps (-X): a later group reuses the packages the first compiled (the Go build cache).
controlplane="$cluster_dir/controlplane"
go_module controlplane "$controlplane" "$k8s_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubelet=k8s.io/kubernetes/cmd/kubelet
go_module controlplane "$controlplane" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  kwok=sigs.k8s.io/kwok/cmd/kwok

if ! $core_only; then
  # The real-node tier: cluster DNS (the plugins its Corefile uses), the service proxy, the pod
  # sandbox process (its image is built locally) and the NetworkPolicy firewall.
  go_module controlplane "$controlplane" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    coredns=jax-training/cluster/controlplane/coredns
  go_module controlplane "$controlplane" "$k8s_ldflags" kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
  go_module pause "$cluster_dir/pause" "" pause=jax-training/cluster/pause
  go_module kube-router "$cluster_dir/kube-router" \
    "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    kube-router=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  go_module controlplane "$controlplane" \
    "-X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION -X sigs.k8s.io/jobset/pkg/version.GitCommit=" \
    jobset-controller=sigs.k8s.io/jobset
  go_module controlplane "$controlplane" "" \
    training-operator=github.com/kubeflow/training-operator/cmd/training-operator.v1 \
    trainer-controller-manager=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
  go_module controlplane "$controlplane" \
    "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=" \
    kueue=sigs.k8s.io/kueue/cmd/kueue
  # CRDs that ../shared/crds lacks, from the releases' own sources: the TrainingRuntime CRD (the
  # Trainer controller watches it) and Kueue's, as one file.
  module_dir() { (cd "$controlplane" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$1"); }
  trainer_crd="$JAXT_CACHE/tools/trainer-$TRAINER_VERSION/trainer.kubeflow.org_trainingruntimes.yaml"
  if [ ! -f "$trainer_crd" ]; then
    mkdir -p "$(dirname "$trainer_crd")"
    cp "$(module_dir github.com/kubeflow/trainer/v2)/manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml" \
      "$trainer_crd.tmp"
    mv "$trainer_crd.tmp" "$trainer_crd"
  fi
  kueue_crds="$JAXT_CACHE/tools/kueue-$KUEUE_VERSION/kueue-crds.yaml"
  if [ ! -f "$kueue_crds" ]; then
    mkdir -p "$(dirname "$kueue_crds")"
    for f in "$(module_dir sigs.k8s.io/kueue)"/config/components/crd/bases/*.yaml; do
      printf -- '---\n'; cat "$f"
    done >"$kueue_crds.tmp"
    mv "$kueue_crds.tmp" "$kueue_crds"
  fi
fi
log "binaries ready in $JAXT_BIN"
