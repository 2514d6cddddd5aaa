#!/usr/bin/env bash
# Pins one Kubernetes release for the real-cluster suite: writes tools/k8s-1.MINOR/go.mod
# (k8s.io/kubernetes at VERSION, and a `replace` of each of its staging modules, k8s.io/api,
# k8s.io/apiserver, …, at the matching v0.MINOR.PATCH: a consumer of k8s.io/kubernetes must name
# them itself, since the module refers to them as v0.0.0), then `go mod tidy` writes its go.sum.
# Commit both. A new patch of a supported minor replaces that minor's pin; a new minor adds one
# (and tools/default-minor names the newest).
#
#   test/cluster/tools/pin-kubernetes.sh v1.37.2
set -euo pipefail
version=${1:-}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "usage: $0 v1.MINOR.PATCH" >&2; exit 2; }
minor=${BASH_REMATCH[1]} patch=${BASH_REMATCH[2]}
dir=$(cd "$(dirname "$0")" && pwd)/k8s-1.$minor
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[ -f "$mod" ] || { echo "$0: the module proxy did not serve k8s.io/kubernetes@$version" >&2; exit 1; }
mkdir -p "$dir"
{
  echo "// The control plane and kubelet of Kubernetes 1.$minor for the real-cluster suite, built from"
  echo "// Kubernetes' own module at one pinned release (test/cluster/build.sh --kubernetes 1.$minor)."
  echo "// Written by pin-kubernetes.sh; never \`go get -u\` here: it would move the dependencies that"
  echo "// release was tested with."
  echo "module sidecar-injector.test/cluster/tools/k8s-1.$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "godebug default=go1.26"
  echo
  echo "tool ("
  for command in kube-apiserver kube-controller-manager kubectl kubelet; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$command"; done
  echo ")"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  grep -oE '^	k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$mod" | awk -v v="v0.$minor.$patch" '{print "replace " $1 " => " $1 " " v}'
} > "$dir/go.mod"
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "$dir"
