#!/usr/bin/env bash
# Installs what the real-node tier needs, idempotently: containerd, runc, the CNI plugins, iptables,
# ipset (kube-router's NetworkPolicy firewall), buildah and debootstrap from Debian's packages (root),
# then builds the trainer image (scripts/image.sh, cached). The node's Go binaries (kubelet, CoreDNS,
# pause, kube-router) come from build.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
[ $# -eq 0 ] || bad_usage "unknown argument: $1 (usage: scripts/cluster/node-setup.sh)"

declare -A package_of=([containerd]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [ipset]=ipset [conntrack]=conntrack [buildah]=buildah [debootstrap]=debootstrap)
missing=()
for cmd in "${!package_of[@]}"; do
  [ -x "$cmd" ] || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || missing+=("${package_of[$cmd]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  # shellcheck disable=SC2046
  apt_install $(printf '%s\n' "${missing[@]}" | sort -u)
fi
"$JAXT_ROOT/scripts/image.sh" >/dev/null
