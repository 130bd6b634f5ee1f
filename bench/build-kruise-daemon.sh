#!/usr/bin/env bash
# Builds kruise-daemon, OpenKruise's per-node daemon, from the github.com/openkruise/kruise Go module
# (package cmd/daemon), pinned to one release, for the benchmark's kruise part (bench/kruise.ts),
# and caches what the part needs outside the repo; prints the cache directory, which holds:
#   kruise-daemon      the static binary (CGO_ENABLED=0)
#   kruise-daemon.tar  an OCI archive of it, sidecar-terminator.local/kruise-daemon:$KRUISE_VERSION,
#                      made offline as the e2e images are (e2e/images/oci.sh)
#   crds/              the CustomResourceDefinitions the daemon watches, from the module's
#                      config/crd/bases/ (ContainerRecreateRequest, NodeImage, NodePodProbe) and
#                      ImagePullJob, which its NodeImages stand for
#   version, image     the release, and the image's name
# Reuses the cache when all of it is there; one build at a time (a second caller waits, then finds
# it built). KRUISE_DAEMON_DIR picks another cache directory.
#
# The module proxy serves v1.9.0 by exact version, but the Go checksum database, as the proxy
# relays it, has no record of it (404): the module's hashes are pinned here instead, in the go.sum
# of a throwaway module, so the download is still verified (a mismatch stops the build). Its
# dependencies verify against the module's own go.sum and the checksum database as usual.
set -euo pipefail
KRUISE_VERSION=v1.9.0
KRUISE_SUM='h1:7MWDURrU7VlkapL1qaFLQehJG0OdTN338RSvzuzR3kU='
KRUISE_GOMOD_SUM='h1:WOv5K56Y0/zBNTmQiT8rgY0cSm1o1MCeYmXMWB6GZE8='
IMAGE=sidecar-terminator.local/kruise-daemon:$KRUISE_VERSION
CRDS=(containerrecreaterequests nodeimages nodepodprobes imagepulljobs)

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${KRUISE_DAEMON_DIR:-$HOME/.cache/sidecar-terminator/kruise-daemon-$KRUISE_VERSION}
built() { [ -x "$out/kruise-daemon" ] && [ -s "$out/kruise-daemon.tar" ] && [ -s "$out/version" ] && [ -s "$out/image" ] && [ -d "$out/crds" ]; }
if built; then echo "$out"; exit 0; fi
mkdir -p "$out"
exec 8>>"$out/.build.lock"
flock 8
if built; then echo "$out"; exit 0; fi

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s)

mkdir "$work/pin"
(
  cd "$work/pin"
  go mod init local/kruise-daemon-pin >/dev/null 2>&1
  printf 'github.com/openkruise/kruise %s %s\ngithub.com/openkruise/kruise %s/go.mod %s\n' \
    "$KRUISE_VERSION" "$KRUISE_SUM" "$KRUISE_VERSION" "$KRUISE_GOMOD_SUM" >go.sum
  go mod download -json "github.com/openkruise/kruise@$KRUISE_VERSION" >"$work/download.json"
)
dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' "$work/download.json")
[ -d "$dir/cmd/daemon" ] || { echo "build-kruise-daemon: no cmd/daemon in the module ($(cat "$work/download.json"))" >&2; exit 1; }

# Built as the main module, in a writable copy (the module cache is read-only): its own replace
# directives (k8s.io/* pinned to one release) apply only there.
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
(
  cd "$work/src"
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" nice -n 19 \
    go build -trimpath -ldflags "-s -w" -o "$work/kruise-daemon" ./cmd/daemon
)

mkdir -p "$work/crds"
for crd in "${CRDS[@]}"; do
  cp "$dir/config/crd/bases/apps.kruise.io_$crd.yaml" "$work/crds/"
  chmod u+w "$work/crds/apps.kruise.io_$crd.yaml"
done

# The image: the binary alone at /kruise-daemon (the path OpenKruise's chart runs), and /tmp.
mkdir -p "$work/rootfs/tmp"
chmod 1777 "$work/rootfs/tmp"
cp "$work/kruise-daemon" "$work/rootfs/kruise-daemon"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/layer.tar" -C "$work/rootfs" .
# shellcheck source=../e2e/images/oci.sh
source "$repo/e2e/images/oci.sh"
oci_archive "$work/kruise-daemon.tar" "$IMAGE" "$work/layer.tar" '"Entrypoint":["/kruise-daemon"]'

rm -rf "$out/crds"
mv "$work/crds" "$out/crds"
mv "$work/kruise-daemon.tar" "$out/kruise-daemon.tar"
mv "$work/kruise-daemon" "$out/kruise-daemon"
echo "$IMAGE" >"$out/image"
echo "$KRUISE_VERSION" >"$out/version"
echo "built kruise-daemon $KRUISE_VERSION in $(( $(date +%s) - start ))s" >&2
echo "$out"
