#!/usr/bin/env bash
# Builds the real-cluster suite's control plane from Go modules pinned in test/cluster/tools:
# kube-apiserver, kube-controller-manager, kubectl and the kubelet of the world's real node from
# k8s.io/kubernetes, etcd from
# go.etcd.io/etcd/server/v3, and helm from helm.sh/helm/v4 (the chart's tests). The binaries go to a cache folder outside the clone, keyed by what
# decides their bytes (the pinned versions, both go.sum files, the Go version), so a second
# clone on the same machine reuses them. Prints that folder on stdout; progress on stderr.
#
#   test/cluster/build.sh [--kubernetes MINOR]
#
# MINOR is one of the supported minors, each a Go module of its own (tools/k8s-MINOR, its go.sum
# committed); without it, the one tools/default-minor names (the newest). etcd and helm are the
# same for every minor.
#
#   SIDECAR_INJECTOR_CLUSTER_CACHE  the cache's parent folder (default: the user's cache folder)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/tools
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

kubernetes=$(cat "$tools/default-minor")
while [ $# -gt 0 ]; do
  case $1 in
    --kubernetes) kubernetes=${2:-}; shift 2 || { echo "build.sh: --kubernetes needs a minor" >&2; exit 2; } ;;
    *) echo "usage: test/cluster/build.sh [--kubernetes MINOR]" >&2; exit 2 ;;
  esac
done
k8s_tools=$tools/k8s-$kubernetes
if ! [[ $kubernetes =~ ^1\.[0-9]+$ ]] || [ ! -f "$k8s_tools/go.mod" ]; then
  echo "build.sh: Kubernetes $kubernetes is not one of the supported minors ($(cd "$tools" && ls -d k8s-* | sed 's/^k8s-//' | paste -sd' '))" >&2
  exit 2
fi

k8s_version=$(cd "$k8s_tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(cd "$tools/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] || { echo "build.sh: cannot read the pinned versions" >&2; exit 2; }
go_version=$(go env GOVERSION)
key=$(cat "$k8s_tools/go.mod" "$k8s_tools/go.sum" "$tools/etcd/go.mod" "$tools/etcd/go.sum" \
  <(echo "$go_version") "$0" | sha256sum | cut -c1-12)
parent=${SIDECAR_INJECTOR_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecar-injector/cluster}
out=$parent/kubernetes-$k8s_version-etcd-$etcd_version-$key

# helm, in a cache folder of its own (its pin moves apart from the control plane's), linked
# into the control plane's folder so that one folder holds every tool.
helm_version=$(cd "$tools/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
helm_key=$(cat "$tools/helm/go.mod" "$tools/helm/go.sum" <(echo "$go_version") | sha256sum | cut -c1-12)
helm_out=$parent/helm-$helm_version-$helm_key
build_helm() {
  [ -f "$helm_out/.complete" ] && return 0
  local started work_helm
  started=$(date +%s)
  mkdir -p "$parent"
  work_helm=$(mktemp -d "$parent/.build-helm.XXXXXX")
  echo "build.sh: building helm $helm_version with $go_version" >&2
  (cd "$tools/helm" && go build -trimpath -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
    -o "$work_helm/helm" helm.sh/helm/v4/cmd/helm) || { rm -rf "$work_helm"; return 1; }
  touch "$work_helm/.complete"
  rm -rf "$helm_out"
  mv "$work_helm" "$helm_out"
  echo "build.sh: built helm in $(($(date +%s) - started)) s" >&2
}
link_helm() { ln -sfn "$helm_out/helm" "$1/helm"; }

if [ -f "$out/.complete" ]; then
  build_helm
  link_helm "$out"
  echo "$out"
  exit 0
fi

start=$(date +%s)
mkdir -p "$parent"
work=$(mktemp -d "$parent/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The version stamp: without it /version says v0.0.0-master, and the injector gates features on
# gitVersion. The names are those of kube::version::ldflags in Kubernetes' hack/lib/version.sh.
minor=$(echo "$k8s_version" | cut -d. -f2)
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

echo "build.sh: building Kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kubectl, kubelet) with $go_version" >&2
(cd "$k8s_tools" && go build -trimpath -pgo=off -tags=selinux,notest -ldflags="all=$ld" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet)
echo "build.sh: building etcd $etcd_version" >&2
(cd "$tools/etcd" && go build -trimpath -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version" \
  -o "$work/etcd" go.etcd.io/etcd/server/v3)

"$work/kube-apiserver" --version | grep -qx "Kubernetes $k8s_version" \
  || { echo "build.sh: kube-apiserver does not report $k8s_version" >&2; exit 1; }
build_helm
link_helm "$work"
touch "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
echo "build.sh: built in $(($(date +%s) - start)) s into $out" >&2
echo "$out"
