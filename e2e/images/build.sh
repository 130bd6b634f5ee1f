#!/usr/bin/env bash
# Builds the offline test images (no registry is reachable) from Debian's busybox-static:
#   busybox.tar  OCI archive, sidecar-terminator.local/busybox:1   (no entrypoint, cmd sh)
#   pause.tar    OCI archive, sidecar-terminator.local/pause:1     (sleeps until SIGTERM)
#   quick-exit.tar OCI archive, sidecar-terminator.local/quick-exit:1 (QUICK_EXIT_IMAGE=... to
#                rename; images/quick-exit: exits 0 whatever its arguments, at the paths in
#                images/quick-exit/paths.txt)
#   rootfs.tar   the bare busybox layer, for `docker import`
# Usage: build.sh OUT_DIR. Import with `ctr -n k8s.io images import OUT_DIR/busybox.tar`.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "build.sh: $busybox missing: apt-get install busybox-static" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

root="$work/rootfs"
mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root,var/run} "$root/usr"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
ln -s ../bin "$root/usr/bin"
ln -s bin "$root/sbin"
ln -s ../bin "$root/usr/sbin"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
chmod 1777 "$root/tmp"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out/rootfs.tar" -C "$root" .

# shellcheck source=e2e/images/oci.sh
source "$(dirname "$0")/oci.sh"

oci_archive "$out/busybox.tar" sidecar-terminator.local/busybox:1 "$out/rootfs.tar" '"Cmd":["sh"]'
oci_archive "$out/pause.tar" sidecar-terminator.local/pause:1 "$out/rootfs.tar" \
  '"Entrypoint":["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]'

# The quick-exit image: one tiny static program at every path in paths.txt.
src=$(cd "$(dirname "$0")/../../images/quick-exit" && pwd)
quick="$work/quick-exit"
mkdir -p "$quick/bin"
gcc -static -nostdlib -Os -s -o "$quick/bin/quick-exit" "$src/quick-exit.c"
grep -v '^#' "$src/paths.txt" | while read -r path; do
  [ -n "$path" ] || continue
  mkdir -p "$quick$(dirname "$path")"
  ln -sf /bin/quick-exit "$quick$path"
done
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/quick-exit.layer.tar" -C "$quick" .
oci_archive "$out/quick-exit.tar" "${QUICK_EXIT_IMAGE:-sidecar-terminator.local/quick-exit:1}" "$work/quick-exit.layer.tar" '"Entrypoint":["/bin/quick-exit"]'
