#!/usr/bin/env bash
# A real Kubernetes for one command:
#
#   scripts/cluster.sh [--kubernetes MINOR] run -- CMD ARGS...
#
# builds the pinned control plane of that minor (default: test/cluster/build.sh's) if it is not in
# the cache yet, brings
# up etcd, kube-apiserver and kube-controller-manager with the injector installed from manifests/
# (kubectl apply -k, as the README says) and the namespace `demo` opted in, runs CMD with
# KUBECONFIG set to an admin kubeconfig and that version's kubectl first on PATH, tears it all
# down when CMD ends, and exits with CMD's status. Everything runs inside network, mount and PID
# namespaces made here, so nothing reaches this machine's network and nothing outlives the run.
# The injector's pods run on the real node (`real-node`: a kubelet with containerd and runc,
# test/cluster/world/real-node.ts), from the image `make image` built (made here first when it is
# missing or older than the code), pushed to the world's registry and pulled by digest; a
# stand-in node (`node-1`) reports the simulated fleets' pods Running. SIDECAR_INJECTOR_REAL_NODE=off
# starts the control plane with only the stand-in and installs nothing (nothing could run it).
# Needs root (Linux namespaces, nftables, cgroups). SIDECAR_INJECTOR_CLUSTER_KEEP=1 keeps the logs
# also when CMD succeeds.
set -euo pipefail
usage() {
  echo "usage: scripts/cluster.sh [--kubernetes MINOR] run -- CMD ARGS..." >&2
  exit 2
}
build_args=()
if [ "${1:-}" = --kubernetes ]; then
  [ -n "${2:-}" ] || usage
  build_args=(--kubernetes "$2")
  shift 2
fi
[ "${1:-}" = run ] || usage
shift
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || usage
cd "$(dirname "$0")/.."
# The machine's tools, never a package's: under npm, node_modules/.bin comes first on PATH, and
# @vercel/nft (a dependency of the image build) installs a command named nft.
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/node_modules/\.bin$' | paste -sd: -)
export PATH
if [ "$(id -u)" != 0 ]; then
  echo "scripts/cluster.sh: needs root (it makes network and mount namespaces, and runs a kubelet with containerd)" >&2
  exit 2
fi
for tool in unshare nsenter nft ip openssl; do
  command -v "$tool" >/dev/null || { echo "scripts/cluster.sh: $tool is missing (Debian: util-linux, nftables, iproute2, openssl, coreutils)" >&2; exit 2; }
done
bin=$(test/cluster/build.sh "${build_args[@]}")
[ -f dist/test/cluster/world/main.js ] || npm run build >&2
# The image the real node pulls: the world has no network to build it in, so it is built here, and
# never older than what it is built from (a stale image would test other code than the clone's).
if [ "${SIDECAR_INJECTOR_REAL_NODE:-}" != off ]; then
  archive=${IMAGE_ARCHIVE:-build/sidecar-injector-$(node -p "require('./package.json').version").oci.tar}
  # shellcheck disable=SC2046 # one path per line, none with a space
  if [ ! -f "$archive" ] || [ -n "$(find $(grep -v '^#' scripts/image/inputs) -newer "$archive" -type f -print -quit)" ]; then
    echo "scripts/cluster.sh: $archive is missing or older than the code: make image" >&2
    make --no-print-directory image IMAGE_ARCHIVE="$archive" >&2
  fi
fi
# No proxy inside: the API server would send service webhook calls to it (kubernetes#107446).
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NO_PROXY no_proxy
# A PID namespace too: the world's process is its init, so when it ends, however it ends (a
# crash, SIGKILL), the kernel ends every process the world started.
exec unshare --net --mount --propagation private --pid --fork --mount-proc --kill-child -- \
  "$(command -v node)" dist/test/cluster/world/main.js --bin "$bin" --opt-in demo -- "$@"
