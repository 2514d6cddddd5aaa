#!/usr/bin/env bash
# The real node's images, built here (no registry outside can be reached): a static `pause` as
# the pod sandbox image, and a busybox image (Debian's busybox-static) that the real-node tests'
# sidecars and apps run, as OCI archives for `ctr images import`; plus a second busybox of other
# content as an OCI layout for the world's registry (an image the kubelet pulls). The busybox image
# also holds /bin/api-whoami (api-whoami/, Go's standard library only): an agent's call to the API
# server with the pod's token, which busybox's TLS cannot make with kube-apiserver.
#
#   images.sh OUT   (Debian: gcc, busybox-static, umoci, skopeo; Go)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
# The machine's architecture, in the OCI names Go uses (amd64, arm64, …).
arch=$(go env GOARCH)
mkdir -p "$out"
cd "$out"
gcc -static -Os -s -o pause "$here/pause.c"
rm -rf layout unpacked
umoci init --layout layout
umoci new --image layout:pause
umoci unpack --rootless --image layout:pause unpacked
cp pause unpacked/rootfs/pause
umoci repack --image layout:pause unpacked && rm -rf unpacked
umoci config --image layout:pause --config.entrypoint /pause --config.user 65535:65535 --os linux --architecture "$arch"
umoci new --image layout:busybox
umoci unpack --rootless --image layout:busybox unpacked
mkdir -p unpacked/rootfs/bin unpacked/rootfs/tmp unpacked/rootfs/etc
cp "$(command -v busybox)" unpacked/rootfs/bin/busybox
(cd "$here/api-whoami" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/unpacked/rootfs/bin/api-whoami" .)
(cd unpacked/rootfs/bin && for applet in $(./busybox --list); do [ "$applet" = busybox ] || ln -s busybox "$applet"; done)
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > unpacked/rootfs/etc/passwd
printf 'root:x:0:\nnobody:x:65534:\n' > unpacked/rootfs/etc/group
chmod 1777 unpacked/rootfs/tmp
umoci repack --image layout:busybox unpacked && rm -rf unpacked
umoci config --image layout:busybox --config.cmd sh --config.env PATH=/bin --os linux --architecture "$arch"
# The registry's copy differs in content: an image ID the kubelet pulled is no longer "present"
# for imagePullPolicy: Never under another name (KubeletEnsureSecretPulledImages).
umoci unpack --rootless --image layout:busybox unpacked
echo registry > unpacked/rootfs/etc/pulled-from
umoci repack --image layout:busybox-pulled unpacked && rm -rf unpacked
skopeo copy -q oci:layout:pause oci-archive:pause.tar:registry.k8s.io/pause:3.10
skopeo copy -q oci:layout:busybox oci-archive:busybox.tar:sidecar-injector.test/busybox:1
