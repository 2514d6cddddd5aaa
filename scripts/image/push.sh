#!/bin/sh
# Pushes the image archive `make image` wrote to a registry, without a daemon (skopeo), and
# records what it pushed in DIGEST_FILE as REPOSITORY@sha256:…: `make deploy` and `make
# release` pin the install to it, and refuse it for another repository. PUSH_FLAGS go to
# skopeo (e.g. --dest-tls-verify=false for a registry on plain HTTP; --dest-authfile FILE for
# one that needs a login).
#   scripts/image/push.sh ARCHIVE IMAGE DIGEST_FILE [SKOPEO_FLAGS...]
set -eu
archive=$1
image=$2
digest_file=$3
shift 3
if [ ! -f "$archive" ]; then
  echo "make push: no image archive at $archive: build it first (make image IMAGE=$image)" >&2
  exit 2
fi
# A name without a registry host would go to Docker Hub's library/: say so rather than try.
case "${image%%/*}" in
  *.* | *:* | localhost) case "$image" in */*) ;; *) host_missing=1 ;; esac ;;
  *) host_missing=1 ;;
esac
if [ "${host_missing:-}" = 1 ]; then
  echo "make push: IMAGE=$image names no registry: give one, e.g. make push IMAGE=registry.example.com/platform/sidecar-injector:TAG" >&2
  exit 2
fi
case "$image" in
  *@*) echo "make push: IMAGE=$image names a digest: give the tag to push to (the digest is the archive's)" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$digest_file")"
rm -f "$digest_file"
pushed=$(mktemp)
trap 'rm -f "$pushed"' EXIT
# --preserve-digests: the registry gets the archive's manifest as it is, so the digest pushed is
# the digest built (and recorded in the SBOM), or the push fails.
skopeo copy --quiet --preserve-digests --digestfile "$pushed" "$@" "oci-archive:$archive" "docker://$image"
# The repository: IMAGE without its tag (a colon after the last slash).
last=${image##*/}
repository=${image%/*}/${last%%:*}
echo "$repository@$(cat "$pushed")" > "$digest_file"
echo "pushed $image as $(cat "$digest_file")"
