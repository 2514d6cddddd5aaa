#!/usr/bin/env bash
# One container of a pod the test world's node runs, started by node.ts as
#   nsenter --target SANDBOX --net --uts -- unshare --mount --propagation private -- container.sh SPEC_DIR
# In the pod's network and UTS namespaces (held by its sandbox process, as the pause container
# holds them) and a mount namespace of its own, it builds the container's root (the image's root filesystem, or the
# clone's build beside the machine's own Node and libraries), mounts the pod's volumes at their
# mountPaths, and execs the container's command under chroot as its user, with exactly the
# environment the node computed: the process that runs is the container's, with this PID.
set -euo pipefail
spec=$1
# shellcheck source=/dev/null
. "$spec/config.sh" # MODE ROOTFS ROOT USERSPEC READONLY CLONE NODE_DIR
mkdir -p "$ROOT"
if [ "$MODE" = image ]; then
  mount --bind "$ROOTFS" "$ROOT"
else
  # The clone's build as an image would hold it: the machine's /usr and libraries read-only,
  # its Node, and the clone at /app.
  mount -t tmpfs -o mode=0755 tmpfs "$ROOT"
  for d in usr lib lib32 lib64 bin sbin; do
    if [ -L "/$d" ]; then
      ln -s "$(readlink "/$d")" "$ROOT/$d"
    elif [ -d "/$d" ]; then
      mkdir -p "$ROOT/$d"
      mount --rbind "/$d" "$ROOT/$d"
      mount -o remount,bind,ro "$ROOT/$d"
    fi
  done
  case "$NODE_DIR" in
  /usr/*) ;;
  *)
    mkdir -p "$ROOT$NODE_DIR"
    mount --bind "$NODE_DIR" "$ROOT$NODE_DIR"
    mount -o remount,bind,ro "$ROOT$NODE_DIR"
    ;;
  esac
  mkdir -p "$ROOT/app" "$ROOT/etc" "$ROOT/tmp"
  mount --bind "$CLONE" "$ROOT/app"
  mount -o remount,bind,ro "$ROOT/app"
fi
mkdir -p "$ROOT/proc" "$ROOT/dev"
mount -t proc proc "$ROOT/proc"
mount -t tmpfs -o mode=0755 tmpfs "$ROOT/dev"
for dev in null zero random urandom; do
  touch "$ROOT/dev/$dev"
  mount --bind "/dev/$dev" "$ROOT/dev/$dev"
done
# The pod's volumes: lines of "SOURCE<TAB>MOUNTPATH<TAB>ro|rw".
while IFS=$'\t' read -r source target mode; do
  [ -n "$source" ] || continue
  mkdir -p "$ROOT$target"
  mount --bind "$source" "$ROOT$target"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$ROOT$target"; fi
done <"$spec/mounts"
if [ "$READONLY" = true ]; then mount -o remount,bind,ro "$ROOT"; fi
mapfile -d '' argv <"$spec/argv"
mapfile -d '' environment <"$spec/environment"
exec env -i "${environment[@]}" "$(command -v chroot)" --userspec="$USERSPEC" "$ROOT" "${argv[@]}"
