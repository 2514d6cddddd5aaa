#!/usr/bin/env bash
# Builds kube-router (its NetworkPolicy controller enforces NetworkPolicy with iptables rules and
# ipsets) from the Go module pinned in test/cluster/tools/kube-router, for the real-cluster test
# that proves the shipped NetworkPolicy on the real node. It runs only inside the test world's
# network namespace, for that test, and is never part of the product: advisories about its own
# releases do not reach an install. The binary goes to a cache folder outside the clone, keyed by
# what decides its bytes (the pin, go.sum, the Go version, this script), beside the control
# plane's (test/cluster/build.sh). Prints the binary's path on stdout; progress on stderr.
#
#   SIDECAR_INJECTOR_CLUSTER_CACHE  the cache's parent folder (default: the user's cache folder)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=$here/tools/kube-router
module=github.com/cloudnativelabs/kube-router/v2
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

version=$(cd "$tool" && go list -m -f '{{.Version}}' "$module")
[ -n "$version" ] || { echo "build-kube-router.sh: cannot read the pinned version" >&2; exit 2; }
go_version=$(go env GOVERSION)
key=$(cat "$tool/go.mod" "$tool/go.sum" <(echo "$go_version") "$0" | sha256sum | cut -c1-12)
parent=${SIDECAR_INJECTOR_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecar-injector/cluster}
out=$parent/kube-router-$version-$key

if [ ! -f "$out/.complete" ]; then
  start=$(date +%s)
  mkdir -p "$parent"
  work=$(mktemp -d "$parent/.build-kube-router.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "build-kube-router.sh: building kube-router $version with $go_version" >&2
  (cd "$tool" && go build -trimpath -ldflags="-s -w" -o "$work/kube-router" "$module/cmd/kube-router")
  touch "$work/.complete"
  rm -rf "$out"
  mv "$work" "$out"
  trap - EXIT
  echo "build-kube-router.sh: built in $(($(date +%s) - start)) s" >&2
fi
echo "$out/kube-router"
