#!/bin/sh
# Builds the Dockerfile without a daemon (buildah, storage under build/buildah) into an OCI
# image archive. Reproducible: the commit's time is the image's creation time and every file's
# time, layers are gzip-compressed (deterministic), and no build host identity is recorded.
#   scripts/image/build.sh IMAGE ARCHIVE EPOCH
set -eu
image=$1
archive=$2
epoch=$3
store="$(pwd)/build/buildah"
buildah() { command buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"; }
mkdir -p "$(dirname "$archive")"
buildah rmi --force "$image" >/dev/null 2>&1 || true
# FROM scratch and COPY only: nothing runs inside the image, so no isolation is needed.
BUILDAH_ISOLATION=chroot buildah bud --quiet --format oci --timestamp "$epoch" --identity-label=false --omit-history \
  --layers=false --tag "$image" --file Dockerfile .
layout="$store/layout"
rm -rf "$layout" "$archive"
buildah push --quiet --compression-format gzip --format oci "$image" "oci:$layout:$image"
buildah rmi --force "$image" >/dev/null
# The archive itself byte for byte the same too: sorted entries, one time, numeric owners.
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$archive" oci-layout index.json blobs
rm -rf "$layout"
