#!/bin/sh
# Pushes the image archive `make image` wrote to a registry, without a daemon (skopeo), and
# writes the pushed manifest's digest to DIGEST_FILE: `make deploy` and `make release` pin the
# install to it. PUSH_FLAGS go to skopeo (e.g. --dest-tls-verify=false for a registry on
# plain HTTP, --dest-creds or --dest-authfile for one that needs a login).
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
mkdir -p "$(dirname "$digest_file")"
# --preserve-digests: the registry gets the archive's manifest as it is, so the digest pushed is
# the digest built (and recorded in the SBOM), or the push fails.
skopeo copy --quiet --preserve-digests --digestfile "$digest_file" "$@" "oci-archive:$archive" "docker://$image"
echo "pushed $image@$(cat "$digest_file")"
