#!/usr/bin/env bash
# Builds the trainer image (trainer/Dockerfile) as <repository>:<version>-<variant>, the tag a job's
# empty image.tag resolves to, tags it <version>-<commit>-<variant> too (the checkout's commit, which
# names what the image holds; a build one tag can name for ever), and saves it as a docker-archive that `ctr images import` or
# `docker load` reads; with --push, pushes it to a registry. Builds with buildah (own storage under
# $JAXT_CACHE, no registry or daemon; what the tests use), podman or docker, whichever is present.
# buildah builds are cached: rebuilt only when the Dockerfile, trainer/, the variant, the uid or the base change.
# --debian trixie builds on Python 3.13, which runs the newest JAX (trainer/constraints.txt pins both lines).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

IMAGE_REPOSITORY=localhost/jax-training/trainer
BUILD_CA_BUNDLE="${JAXT_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
# The one version (trainer/__init__.py) and generator/images.py's variants (standard library only).
version="$(cd "$JAXT_ROOT" && python3 -c 'import trainer; print(trainer.__version__)')"
variants="$(cd "$JAXT_ROOT" && python3 -m generator.images)"

usage() {
  cat <<EOF
Usage: scripts/image.sh [--variant ${variants// /|}] [--debian bookworm|trixie] [--builder buildah|podman|docker]
                        [--base IMAGE] [--push REPOSITORY] [--rebuild] [--print-archive]

Builds trainer/Dockerfile as $IMAGE_REPOSITORY:$version-<variant>, tags it $version-<commit>-<variant>
too (the checkout's commit; <commit>-dirty<hash of trainer/> when trainer/ differs from it), saves it
to \$JAXT_CACHE/images/trainer-<variant>.tar and prints the image name (or, with --print-archive, the
archive's path). With --debian trixie the tags and the archive end in -trixie. The <version>-<variant>
tag moves with every build: a node that has it keeps running its copy under IfNotPresent; pin a
job to one build with the commit tag or, after --push, the digest.

  --variant V         cpu (default: jax from PyPI, CPU only; the image of accelerator cpu) or
                      cuda12 (jax[cuda12], ~5 GB; the image of accelerator gpu)
  --debian RELEASE    the Debian release of the base, and so its Python and JAX (trainer/constraints.txt):
                      bookworm (default; Python 3.11, jax 0.10) or trixie (Python 3.13, the newest jax)
  --builder B         buildah, podman or docker. Default: the first of them on PATH
  --base IMAGE        the Dockerfile's PYTHON_IMAGE. Default with buildah: a local Debian image of
                      the --debian release with python3, made once with debootstrap (no registry
                      needed); with podman and docker: the release's python:*-slim image
  --push REPOSITORY   also push the image as REPOSITORY:$version-<commit>-<variant> and
                      REPOSITORY:$version-<variant> (for example registry.example.com/ml/jax-training),
                      print that name, and on stderr its digest and the --set line that pins a job
                      to it (image.repository=REPOSITORY,image.digest=sha256:...)
  --rebuild           build again from the base, with no cached layers
  --print-archive     print the archive's path instead of the image name

pip reaches PyPI with the build machine's CA bundle ($BUILD_CA_BUNDLE), given to the build as a
secret: it is never written into the image. Builds use the host network.

Exit codes: 0 built (and pushed); 1 a failure (no builder or runc, the build or the push failed);
2 bad usage (an unknown option, a bad --variant, --debian, --builder or --push value).
EOF
}

variant=cpu debian=bookworm base="" print=image rebuild=false builder="" push=""
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) need_value "$@"; variant="$2"; shift ;;
    --debian) need_value "$@"; debian="$2"; shift ;;
    --builder) need_value "$@"; builder="$2"; shift ;;
    --base) need_value "$@"; base="$2"; shift ;;
    --push) need_value "$@"; push="$2"; shift ;;
    --print-archive) print=archive ;;
    --rebuild) rebuild=true ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; bad_usage "unknown argument: $1" ;;
  esac
  shift
done
# Every value is checked before this machine is asked for a builder.
[[ " $variants " == *" $variant "* ]] || bad_usage "--variant must be one of: $variants (not '$variant')"
# The release's official Python image, for podman and docker (buildah debootstraps the release itself).
case "$debian" in
  bookworm) python_image="" suffix="" ;;  # the Dockerfile's default
  trixie) python_image=python:3.13-slim-trixie suffix=-trixie ;;
  *) bad_usage "--debian must be bookworm or trixie (not '$debian')" ;;
esac
case "$builder" in ""|buildah|podman|docker) ;; *) bad_usage "--builder must be buildah, podman or docker, not '$builder'" ;; esac
if [ -n "$push" ] && ! [[ "$push" =~ ^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$ ]]; then
  bad_usage "--push takes a repository without a tag (registry/path, lowercase), not '$push'"
fi
if [ -z "$builder" ]; then
  for candidate in buildah podman docker; do
    if command -v "$candidate" >/dev/null; then builder="$candidate"; break; fi
  done
  [ -n "$builder" ] || die "no image builder found: install buildah, podman or docker (scripts/setup.sh node installs buildah)"
fi
command -v "$builder" >/dev/null || die "--builder $builder: $builder is not on PATH"
[ "$builder" = docker ] || command -v runc >/dev/null || die "runc is required with $builder (scripts/setup.sh node installs it)"

images="$JAXT_CACHE/images"
mkdir -p "$images"
exec 8>"$images/.lock"
flock 8  # one build at a time per cache
image="$IMAGE_REPOSITORY:$version-$variant$suffix"
# The commit tag: what the image holds, by the checkout's commit; trainer/ changed since it (the build
# context) adds the hash of its files, so that one tag never names two different builds.
commit_tag() {
  local commit dirty=""
  commit="$(git -C "$JAXT_ROOT" rev-parse --short=12 HEAD 2>/dev/null)" || { echo "nocommit"; return; }
  if [ -n "$(git -C "$JAXT_ROOT" status --porcelain -- trainer 2>/dev/null)" ]; then
    dirty="-dirty$(cd "$JAXT_ROOT" && find trainer -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort |
                   xargs sha256sum | sha256sum | cut -c1-8)"
  fi
  echo "$commit$dirty"
}
commit_image="$IMAGE_REPOSITORY:$version-$(commit_tag)-$variant$suffix"
archive="$images/trainer-$variant$suffix.tar"
secret=()
[ -f "$BUILD_CA_BUNDLE" ] && secret=(--secret "id=pip-ca,src=$BUILD_CA_BUNDLE")

# --- buildah: own storage, runc (Debian's crun refuses hybrid cgroup hosts), host network
storage="$JAXT_CACHE/buildah"
bah() { buildah --root "$storage/root" --runroot "$storage/run" --storage-driver overlay "$@"; }

# The default base with buildah: Debian $debian with python3 and venv, from the host's Debian mirror.
local_base() {
  local name="localhost/jax-training/$debian-python:1"
  if ! bah inspect --type image "$name" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || die "debootstrap is required (scripts/setup.sh node installs it)"
    local mirror rootfs
    mirror="$(debian_mirror)"
    rootfs="$(mktemp -d "${TMPDIR:-/tmp}/jaxt-rootfs.XXXXXX")"
    log "making the base image $name with debootstrap from $mirror (once; about 2 minutes)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      "$debian" "$rootfs" "$mirror" >"$images/debootstrap-$debian.log" 2>&1 ||
      { rm -rf "$rootfs"; die "debootstrap failed (log: $images/debootstrap-$debian.log)"; }
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

source "$JAXT_ROOT/scripts/lib/contract.sh"  # RUN_AS_ID: the image's user is the pods' (the Dockerfile has no default)
build_args=(--build-arg "JAX_VARIANT=$variant" --build-arg "RUN_AS_ID=$RUN_AS_ID")
build_log="$images/build-$variant$suffix.log"
build_failed() { tail -n 30 "$build_log" >&2; die "building $image with $1 failed (log: $build_log)"; }

if [ "$builder" = buildah ]; then
  mkdir -p "$storage"
  [ -n "$base" ] || base="$(local_base)"
  key="$( { echo "$version $variant $RUN_AS_ID $base $(bah inspect --type image --format '{{.FromImageID}}' "$base" 2>/dev/null)";
            cd "$JAXT_ROOT" && find trainer -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort | xargs sha256sum; } |
          sha256sum | cut -c1-16)"
  if $rebuild || [ "$(cat "$archive.key" 2>/dev/null)" != "$key" ] || [ ! -f "$archive" ]; then
    log "building $image from trainer/Dockerfile on $base with buildah"
    cache=(--layers)
    ! $rebuild || cache=(--no-cache)
    start=$SECONDS
    (cd "$JAXT_ROOT" && bah bud --quiet --runtime runc --network host "${cache[@]}" \
       --build-arg "PYTHON_IMAGE=$base" "${build_args[@]}" "${secret[@]}" \
       -f trainer/Dockerfile -t "$image" .) >"$build_log" 2>&1 || build_failed buildah
    rm -f "$archive" "$archive.key"
    bah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
    mv "$archive.tmp" "$archive"
    echo "$key" >"$archive.key"
    log "built $image in $((SECONDS - start)) s: $(du -m "$archive" | cut -f1) MB archive"
  fi
  bah tag "$image" "$commit_image"
  push_image() { bah push --quiet --digestfile "$2" "$image" "docker://$1" >/dev/null; }
else
  # podman and docker keep the image in their own storage and cache layers themselves.
  [ -n "$base" ] || base="$python_image"
  [ -z "$base" ] || build_args+=(--build-arg "PYTHON_IMAGE=$base")
  extra=()
  ! $rebuild || extra+=(--no-cache)
  [ "$builder" = docker ] || extra+=(--runtime runc)
  log "building $image from trainer/Dockerfile with $builder"
  (cd "$JAXT_ROOT" && "$builder" build --network host "${extra[@]}" "${build_args[@]}" "${secret[@]}" \
     -f trainer/Dockerfile -t "$image" .) >"$build_log" 2>&1 || build_failed "$builder"
  rm -f "$archive" "$archive.key"
  if [ "$builder" = podman ]; then
    podman save --quiet --format docker-archive -o "$archive.tmp" "$image"
  else
    docker save -o "$archive.tmp" "$image"
  fi
  mv "$archive.tmp" "$archive"
  "$builder" tag "$image" "$commit_image"
  push_image() {
    "$builder" tag "$image" "$1" && "$builder" push "$1" >/dev/null || return 1
    "$builder" inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$1" |
      sed -n "s|^${1%:*}@||p" | head -n1 >"$2"
  }
fi
log "tagged $commit_image (this build) and $image"

if [ -n "$push" ]; then
  pushed="$push:${commit_image##*:}"
  digest_file="$(mktemp)"
  trap 'rm -f "$digest_file"' EXIT
  for name in "$push:$version-$variant$suffix" "$pushed"; do  # the digest file keeps the last push's
    log "pushing $name"
    push_image "$name" "$digest_file" || die "pushing $name with $builder failed (logged in to the registry?)"
  done
  digest="$(tr -d '[:space:]' <"$digest_file")"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "pushed $pushed, but $builder gave no digest for it"
  log "pushed $pushed: digest $digest"
  log "pin a job to this build: --set image.repository=$push,image.digest=$digest"
  image="$pushed"
fi
if [ "$print" = archive ]; then echo "$archive"; else echo "$image"; fi
