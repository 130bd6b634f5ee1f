#!/usr/bin/env bash
# Builds containerd 2 (the daemon, its runc shim and ctr) from the github.com/containerd/containerd/v2
# Go module, pinned to one release (CONTAINERD2_VERSION in versions.env), and caches the binaries
# outside the repo; prints the directory. Reuses the cache when it is complete. The module is
# verified against the Go checksum database as always; it builds with the machine's Go. runc itself
# is Debian's. The local cluster runs it for the newest releases (versions.env), and the integration
# tests run against it beside Debian's containerd 1.6.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
out=${CONTAINERD2_BIN_DIR:-$HOME/.cache/sidecar-terminator/containerd-$CONTAINERD2_VERSION/bin}
commands=(containerd containerd-shim-runc-v2 ctr)

complete=1
for c in "${commands[@]}"; do [ -x "$out/$c" ] || complete=0; done
if [ "$complete" = 1 ]; then echo "$out"; exit 0; fi

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
t0=$SECONDS
say() { echo "build-containerd: [$(( (SECONDS - t0) / 60 ))m$(( (SECONDS - t0) % 60 ))s] $*" >&2; }
say "building containerd $CONTAINERD2_VERSION from its Go module with $(go version | cut -d' ' -f3) into $out (first run only: about 2 minutes on 2 cores)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
# Storage drivers this cluster does not use need C libraries the machine lacks.
tags="no_btrfs no_devmapper no_zfs"
ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD2_VERSION"
for c in "${commands[@]}"; do
  [ -x "$out/$c" ] && continue
  start=$SECONDS
  say "building $c"
  # `go install module@version` builds with exactly the module's own go.mod, outside any module of ours.
  GOBIN="$work" go install -trimpath -tags "$tags" -ldflags "$ldflags" "github.com/containerd/containerd/v2/cmd/$c@$CONTAINERD2_VERSION"
  mv "$work/$c" "$out/$c.tmp"
  mv "$out/$c.tmp" "$out/$c"
  say "built $c in $(( SECONDS - start ))s"
done
echo "$out"
