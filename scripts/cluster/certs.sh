#!/usr/bin/env bash
# Generates the PKI of the test control plane into DIR (idempotent: existing files are kept):
# a CA, the API server's serving cert, client certs (admin, controller-manager, scheduler,
# kubelet client, a real node's kubelet, CoreDNS, kube-router), the service-account signing key pair and a webhook serving cert for the
# controllers that run outside the cluster on 127.0.0.1 (Kubeflow Trainer's also names its Service).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/node.env"
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

case "${1:-}" in -h|--help) echo "Usage: scripts/cluster/certs.sh DIR"; exit 0 ;; esac
[ $# -eq 1 ] || bad_usage "usage: scripts/cluster/certs.sh DIR"
dir="$1"
mkdir -p "$dir"
cd "$dir"
command -v openssl >/dev/null || die "openssl is required"

key() { [ -f "$1.key" ] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

if [ ! -f ca.crt ]; then
  key ca
  openssl req -x509 -new -key ca.key -subj "/CN=jax-training-e2e-ca" -days 30 -out ca.crt \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

# cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
cert() {
  local name="$1" subj="$2" eku="$3" san="${4:-}"
  [ -f "$name.crt" ] && return 0
  key "$name"
  local ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$eku"
  [ -n "$san" ] && ext+=$'\n'"subjectAltName=$san"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile <(printf '%s\n' "$ext") -out "$name.crt" 2>/dev/null
  rm -f "$name.csr"
}

cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=jax-training-e2e-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert webhook "/CN=127.0.0.1" serverAuth "IP:127.0.0.1,DNS:localhost"
cert kwok "/CN=kwok" serverAuth "IP:127.0.0.1,DNS:localhost"
# Kubeflow Trainer: its webhooks on 127.0.0.1, its status server under its Service's name.
cert trainer "/CN=$TRAINER_SERVICE" serverAuth "IP:127.0.0.1,DNS:localhost,DNS:$TRAINER_SERVICE.$TRAINER_NAMESPACE.svc"
# The real node (node.sh): the kubelet's identity, and CoreDNS's (bound to a read-only role).
cert node "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert coredns "/CN=jax-training-coredns" clientAuth
# The real nodes' service proxy: the user the API server's own system:node-proxier binding names.
cert kube-proxy "/CN=system:kube-proxy" clientAuth
# up.sh --network-policy: kube-router's firewall (bound to a read-only role).
cert kube-router "/CN=jax-training-kube-router" clientAuth

# Service-account tokens: signed by the API server (private key), verified with the public key.
[ -f sa.key ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
[ -f sa.pub ] || openssl pkey -in sa.key -pubout -out sa.pub
