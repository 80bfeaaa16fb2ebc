#!/usr/bin/env bash
# Packs the pause binary (scripts/cluster/pause, built by build.sh) into a one-file image and saves
# it as a docker-archive: the pod sandbox image of the real node, made without a registry.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
[ $# -eq 2 ] || bad_usage "usage: scripts/cluster/pause-image.sh IMAGE ARCHIVE"
image="$1" archive="$2"
[ -x "$JAXT_BIN/pause" ] || die "$JAXT_BIN/pause not found (scripts/cluster/build.sh builds it)"
storage="$JAXT_CACHE/buildah"
bah() { buildah --root "$storage/root" --runroot "$storage/run" --storage-driver overlay "$@"; }
c="$(bah from scratch)"
trap 'bah rm "$c" >/dev/null 2>&1 || true' EXIT
bah copy "$c" "$(readlink -f "$JAXT_BIN/pause")" /pause >/dev/null
bah config --entrypoint '["/pause"]' --user 65535:65535 "$c"
bah commit --quiet "$c" "$image" >/dev/null
mkdir -p "$(dirname "$archive")"
rm -f "$archive.tmp"
bah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
mv "$archive.tmp" "$archive"
log "saved $image to $archive"
