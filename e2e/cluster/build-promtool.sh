#!/usr/bin/env bash
# Builds promtool from the github.com/prometheus/prometheus Go module, pinned to one release, and
# caches the binary outside the repo; prints its path. Reuses the cache when the binary is there.
# Like build-helm.sh: fetched through the Go module proxy, verified against the Go checksum
# database, built with the machine's Go. test/prometheus-rules.test.ts runs `promtool check rules`
# and `promtool test rules` with it. PROMTOOL_VERSION picks another release (the module's v0.x
# version: v0.316.0 is Prometheus 3.16.0); PROMTOOL_BIN_DIR another cache directory.
set -euo pipefail
# shellcheck source=versions.env
source "$(dirname "$0")/versions.env"
out=${PROMTOOL_BIN_DIR:-$HOME/.cache/sidecar-terminator/promtool-$PROMTOOL_VERSION}
if [ -x "$out/promtool" ]; then echo "$out/promtool"; exit 0; fi
# One build at a time (CI builds it in the background): a second caller waits, then finds it built.
mkdir -p "$out"
exec 8>>"$out/.build.lock"
flock 8
if [ -x "$out/promtool" ]; then echo "$out/promtool"; exit 0; fi

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
# remove_all_sd: without Prometheus' service discovery plugins, which checking and testing rules
# never use: 1,117 packages to compile instead of 1,364 (v0.316.0).
GOBIN="$work" CGO_ENABLED=0 go install -trimpath -tags remove_all_sd -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION"
mkdir -p "$out"
mv "$work/promtool" "$out/promtool.tmp"
mv "$out/promtool.tmp" "$out/promtool"
echo "built promtool $PROMTOOL_VERSION in $(( $(date +%s) - start ))s" >&2
echo "$out/promtool"
