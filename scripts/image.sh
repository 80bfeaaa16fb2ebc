#!/usr/bin/env bash
# Builds the trainer image (trainer/Dockerfile) with buildah, without a registry or a Docker engine,
# and saves it as a docker-archive that `ctr images import` or `docker load` reads. Cached: the
# image is rebuilt only when the Dockerfile, trainer/, the variant or the base image change.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

IMAGE_REPOSITORY=localhost/jax-training/trainer
BUILD_CA_BUNDLE="${JAXT_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

usage() {
  cat <<EOF
Usage: scripts/image.sh [--variant cpu|cuda12] [--base IMAGE] [--rebuild] [--print-archive]

Builds trainer/Dockerfile into buildah's storage under \$JAXT_CACHE/buildah as
$IMAGE_REPOSITORY:<version>-<variant>, saves it to \$JAXT_CACHE/images/trainer-<variant>.tar and
prints the image name (or, with --print-archive, the archive's path).

  --variant V       cpu (default: jax from PyPI, CPU only) or cuda12 (jax[cuda12], ~5 GB)
  --base IMAGE      the Dockerfile's PYTHON_IMAGE. Default: a local Debian bookworm image with
                    python3, made once with debootstrap (no registry needed). An official
                    python:*-slim image works where a registry is reachable.
  --rebuild         build again from the base, with no cached layers
  --print-archive   print the archive's path instead of the image name

pip reaches PyPI with the build machine's CA bundle ($BUILD_CA_BUNDLE), given to the build as a
secret: it is never written into the image. Builds use runc and the host network.
EOF
}

variant=cpu base="" print=image rebuild=false
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) variant="${2:?--variant needs a value}"; shift ;;
    --base) base="${2:?--base needs a value}"; shift ;;
    --print-archive) print=archive ;;
    --rebuild) rebuild=true ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
case "$variant" in cpu|cuda12) ;; *) die "--variant must be cpu or cuda12, not '$variant'" ;; esac
for tool in buildah runc; do
  command -v "$tool" >/dev/null || die "$tool is required (scripts/setup.sh node installs it)"
done

storage="$JAXT_CACHE/buildah"
images="$JAXT_CACHE/images"
mkdir -p "$storage" "$images"
exec 8>"$images/.lock"
flock 8  # one build at a time per cache
# Own storage, runc (Debian's crun refuses hybrid cgroup hosts), host network (no netavark rules).
bah() { buildah --root "$storage/root" --runroot "$storage/run" --storage-driver overlay "$@"; }

# --- the base image: Debian bookworm with python3 and venv, from the host's Debian mirror
local_base() {
  local name=localhost/jax-training/bookworm-python:1
  if ! bah inspect --type image "$name" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || die "debootstrap is required (scripts/setup.sh node installs it)"
    local mirror rootfs
    mirror="$(debian_mirror)"
    rootfs="$(mktemp -d "${TMPDIR:-/tmp}/jaxt-rootfs.XXXXXX")"
    log "making the base image $name with debootstrap from $mirror (once; about 2 minutes)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$rootfs" "$mirror" >"$images/debootstrap.log" 2>&1 ||
      { rm -rf "$rootfs"; die "debootstrap failed (log: $images/debootstrap.log)"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    local c
    tar -C "$rootfs" --numeric-owner -cf "$rootfs.tar" . && rm -rf "$rootfs"
    c="$(bah from scratch)"
    bah add "$c" "$rootfs.tar" / >/dev/null
    bah config --cmd '["python3"]' --env LANG=C.UTF-8 "$c"
    bah commit --quiet --rm "$c" "$name" >/dev/null
    rm -f "$rootfs.tar"
  fi
  echo "$name"
}
debian_mirror() {
  local uri
  uri="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)"
  [ -n "$uri" ] || uri="$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
  echo "${uri:-http://deb.debian.org/debian}"
}
[ -n "$base" ] || base="$(local_base)"

version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$JAXT_ROOT/pyproject.toml")"
image="$IMAGE_REPOSITORY:$version-$variant"
archive="$images/trainer-$variant.tar"
key="$( { echo "$variant $base $(bah inspect --type image --format '{{.FromImageID}}' "$base" 2>/dev/null)";
          cd "$JAXT_ROOT" && find trainer -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort | xargs sha256sum; } |
        sha256sum | cut -c1-16)"
if $rebuild || [ "$(cat "$archive.key" 2>/dev/null)" != "$key" ] || [ ! -f "$archive" ]; then
  log "building $image from trainer/Dockerfile on $base"
  secret=() cache=(--layers)
  ! $rebuild || cache=(--no-cache)
  [ -f "$BUILD_CA_BUNDLE" ] && secret=(--secret "id=pip-ca,src=$BUILD_CA_BUNDLE")
  start=$SECONDS
  (cd "$JAXT_ROOT" && bah bud --quiet --runtime runc --network host "${cache[@]}" \
     --build-arg "PYTHON_IMAGE=$base" --build-arg "JAX_VARIANT=$variant" "${secret[@]}" \
     -f trainer/Dockerfile -t "$image" .) >"$images/build-$variant.log" 2>&1 ||
    { tail -n 30 "$images/build-$variant.log" >&2; die "building $image failed (log: $images/build-$variant.log)"; }
  rm -f "$archive" "$archive.key"
  bah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
  echo "$key" >"$archive.key"
  log "built $image in $((SECONDS - start)) s: $(du -m "$archive" | cut -f1) MB archive"
fi
if [ "$print" = archive ]; then echo "$archive"; else echo "$image"; fi
