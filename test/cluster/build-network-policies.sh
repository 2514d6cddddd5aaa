#!/usr/bin/env bash
# Builds kube-network-policies (Kubernetes SIG Network's NetworkPolicy enforcer: nftables rules
# that send the first packet of each connection to or from a pod a NetworkPolicy selects to
# nfqueue, judged in user space) from the Go module pinned in test/cluster/tools/kube-network-policies,
# for the real-cluster test that proves the shipped NetworkPolicy on the real node. The binary
# goes to a cache folder outside the clone, keyed by what decides its bytes (the pin, go.sum, the
# Go version), beside the control plane's (test/cluster/build.sh). Prints the binary's path on
# stdout; progress on stderr.
#
#   SIDECAR_INJECTOR_CLUSTER_CACHE  the cache's parent folder (default: the user's cache folder)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=$here/tools/kube-network-policies
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

version=$(cd "$tool" && go list -m -f '{{.Version}}' sigs.k8s.io/kube-network-policies)
[ -n "$version" ] || { echo "build-network-policies.sh: cannot read the pinned version" >&2; exit 2; }
go_version=$(go env GOVERSION)
key=$(cat "$tool/go.mod" "$tool/go.sum" <(echo "$go_version") "$0" | sha256sum | cut -c1-12)
parent=${SIDECAR_INJECTOR_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecar-injector/cluster}
out=$parent/kube-network-policies-$version-$key

if [ ! -f "$out/.complete" ]; then
  start=$(date +%s)
  mkdir -p "$parent"
  work=$(mktemp -d "$parent/.build-kube-network-policies.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "build-network-policies.sh: building kube-network-policies $version with $go_version" >&2
  (cd "$tool" && go build -trimpath -ldflags="-s -w" -o "$work/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd)
  touch "$work/.complete"
  rm -rf "$out"
  mv "$work" "$out"
  trap - EXIT
  echo "build-network-policies.sh: built in $(($(date +%s) - start)) s" >&2
fi
echo "$out/kube-network-policies"
