#!/usr/bin/env bash
# Webhook certificates for the Kubeflow training-operator v1 run outside a cluster, written to DIR.
# Its cert rotator (open-policy-agent/cert-controller) keeps the Secret's certs only if the CA is
# valid for the name "training-operator-ca" and its key is PKCS#1 RSA, the serving cert is valid
# for training-operator.kubeflow.svc, and both outlive its 90-day look-ahead; the serving cert
# also names 127.0.0.1, where the operator serves. The operator reads them from a fixed path, so
# every test cluster on a machine uses the same set: up.sh keeps it in the cache. Idempotent;
# regenerated when less than 100 days remain.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/common.sh"
case "${1:-}" in -h|--help) echo "Usage: scripts/cluster/controllers/training-operator-certs.sh DIR"; exit 0 ;; esac
[ $# -eq 1 ] || bad_usage "usage: scripts/cluster/controllers/training-operator-certs.sh DIR"
dir="$1"
if [ -f "$dir/tls.crt" ] && openssl x509 -in "$dir/tls.crt" -noout -checkend $((100 * 86400)) >/dev/null; then
  exit 0
fi
mkdir -p "$(dirname "$dir")"
work="$(mktemp -d "$dir.XXXXXX")"
cd "$work"
openssl genrsa -traditional -out ca.key 2048 2>/dev/null
openssl req -x509 -new -key ca.key -days 3650 -out ca.crt \
  -subj "/O=training-operator/CN=training-operator-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
  -addext "subjectAltName=DNS:training-operator-ca"
openssl genrsa -traditional -out tls.key 2048 2>/dev/null
openssl req -new -key tls.key -subj "/CN=training-operator.kubeflow.svc" -out tls.csr
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out tls.crt \
  -extfile <(printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:training-operator.kubeflow.svc,IP:127.0.0.1") 2>/dev/null
rm -f tls.csr
# Publish atomically; if another run got there first, keep its set.
if ! mv -T "$work" "$dir" 2>/dev/null; then
  rm -rf "$work"
fi
