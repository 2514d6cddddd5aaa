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
# A name without a registry would go to Docker Hub's library/: say so rather than try.
repository=$(node "$(dirname "$0")/image-name.mjs" push "$image")
mkdir -p "$(dirname "$digest_file")"
rm -f "$digest_file"
pushed=$(mktemp)
trap 'rm -f "$pushed"' EXIT
# --preserve-digests: the registry gets the archive's manifest as it is, so the digest pushed is
# the digest built (and recorded in the SBOM), or the push fails.
skopeo copy --quiet --preserve-digests --digestfile "$pushed" "$@" "oci-archive:$archive" "docker://$image"
echo "$repository@$(cat "$pushed")" > "$digest_file"
echo "pushed $image as $(cat "$digest_file")"
