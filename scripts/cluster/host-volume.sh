#!/usr/bin/env bash
# Creates a PersistentVolumeClaim NAME in NAMESPACE bound to a static PersistentVolume on the real
# node's disk (STATE_DIR/node/volumes/NAME), optionally filled with a copy of SOURCE_DIR. The
# directory belongs to RUN_AS_ID (scripts/lib/contract.sh), the pods' user (a hostPath volume gets no fsGroup change). It is
# replaced if it exists, and goes away with the node (down.sh). With --no-claim only the volume is
# made, reserved for a claim NAME that someone else creates (a render with persistence.enabled and
# persistence.storage_class "-").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
source "$JAXT_ROOT/scripts/lib/contract.sh"  # RUN_AS_ID
claim=true
[ "${1:-}" = --no-claim ] && { claim=false; shift; }
[ $# -ge 3 ] && [ $# -le 4 ] || bad_usage "usage: scripts/cluster/host-volume.sh [--no-claim] STATE_DIR NAMESPACE NAME [SOURCE_DIR]"
state="$1" namespace="$2" name="$3" source="${4:-}"
[ -d "$state/node" ] || die "$state runs no real node (scripts/cluster/up.sh --real-node)"
export KUBECONFIG="$state/kubeconfig"
dir="$state/node/volumes/$name" pv="$namespace-$name"

kubectl -n "$namespace" delete pvc "$name" --ignore-not-found --wait --timeout 60s >/dev/null
kubectl delete pv "$pv" --ignore-not-found --wait --timeout 60s >/dev/null
rm -rf "$dir" && mkdir -p "$dir"
[ -z "$source" ] || cp -r "$source/." "$dir/"
chown -R "$RUN_AS_ID:$RUN_AS_ID" "$dir"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce, ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: $dir, type: Directory}
  claimRef: {namespace: $namespace, name: $name}
YAML
if ! $claim; then echo "$dir"; exit 0; fi
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $name, namespace: $namespace}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: $pv
  resources: {requests: {storage: 1Gi}}
YAML
kubectl -n "$namespace" wait --for=jsonpath='{.status.phase}'=Bound "pvc/$name" --timeout 60s >/dev/null
echo "$dir"
