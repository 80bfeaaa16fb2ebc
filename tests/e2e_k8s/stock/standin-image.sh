#!/usr/bin/env bash
# A stand-in for a stock image (image.source stock) in the real-node tests: the Debian python3 base
# scripts/image.sh makes (debootstrap), with a virtualenv first on PATH holding only jax and jaxlib
# and what they need, from the local wheelhouse (no network): nothing of this project. Prints the
# image's name; its docker-archive is $JAXT_CACHE/images/stock-standin.tar. Built once per version.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib/common.sh"

JAX=0.10.2  # trainer/constraints.txt's line for Python 3.11 (Debian bookworm)
image="localhost/jax-training/stock-standin:jax-$JAX"
base=localhost/jax-training/bookworm-python:1
images="$JAXT_CACHE/images" wheelhouse="$JAXT_CACHE/wheelhouse"
archive="$images/stock-standin.tar"
storage="$JAXT_CACHE/buildah"
bah() { buildah --root "$storage/root" --runroot "$storage/run" --storage-driver overlay "$@"; }

mkdir -p "$images"
exec 8>"$images/.lock"
flock 8  # one build at a time per cache (scripts/image.sh's lock)
if [ "$(cat "$archive.key" 2>/dev/null)" != "$image" ] || [ ! -f "$archive" ]; then
  bah inspect --type image "$base" >/dev/null 2>&1 || die "no base image $base: run scripts/image.sh first"
  c="$(bah from "$base")"
  trap 'bah rm "$c" >/dev/null 2>&1 || true' EXIT
  bah run --runtime runc --network none -v "$wheelhouse:/wheelhouse:ro" "$c" -- sh -c \
    "python3 -m venv /opt/venv && /opt/venv/bin/pip install --quiet --no-index --find-links /wheelhouse \
       jax==$JAX jaxlib==$JAX && rm -rf /root/.cache" >&2
  bah config --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env PYTHONUNBUFFERED=1 --cmd '["python"]' "$c"
  bah commit --quiet --rm "$c" "$image" >/dev/null
  trap - EXIT
  rm -f "$archive" "$archive.key"
  bah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
  echo "$image" >"$archive.key"
fi
echo "$image"
