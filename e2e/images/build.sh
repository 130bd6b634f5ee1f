#!/usr/bin/env bash
# Builds the offline test images (no registry is reachable) from Debian's busybox-static:
#   busybox.tar  OCI archive, sidecar-terminator.local/busybox:1   (no entrypoint, cmd sh)
#   pause.tar    OCI archive, sidecar-terminator.local/pause:1     (sleeps until SIGTERM)
#   quick-exit.tar OCI archive, sidecar-terminator.local/quick-exit:1 (images/quick-exit: exits 0
#                whatever its arguments, at the paths in images/quick-exit/paths.txt)
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

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# oci_archive FILE REF LAYER CONFIG_JSON_FRAGMENT: a one-layer OCI image layout, tarred.
oci_archive() {
  local file=$1 ref=$2 layer=$3 config=$4 layout="$work/layout-$1"
  mkdir -p "$layout/blobs/sha256"
  local layer_sha; layer_sha=$(sha "$layer")
  cp "$layer" "$layout/blobs/sha256/$layer_sha"
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$config" "$layer_sha" > "$work/config.json"
  local config_sha; config_sha=$(sha "$work/config.json")
  mv "$work/config.json" "$layout/blobs/sha256/$config_sha"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config_sha" "$(size "$layout/blobs/sha256/$config_sha")" "$layer_sha" "$(size "$layer")" > "$work/manifest.json"
  local manifest_sha; manifest_sha=$(sha "$work/manifest.json")
  local manifest_size; manifest_size=$(size "$work/manifest.json")
  mv "$work/manifest.json" "$layout/blobs/sha256/$manifest_sha"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_sha" "$manifest_size" "$ref" "${ref##*:}" > "$layout/index.json"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out/$file" -C "$layout" .
}

oci_archive busybox.tar sidecar-terminator.local/busybox:1 "$out/rootfs.tar" '"Cmd":["sh"]'
oci_archive pause.tar sidecar-terminator.local/pause:1 "$out/rootfs.tar" \
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
oci_archive quick-exit.tar sidecar-terminator.local/quick-exit:1 "$work/quick-exit.layer.tar" '"Entrypoint":["/bin/quick-exit"]'
