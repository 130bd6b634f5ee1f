#!/usr/bin/env bash
# Builds the Kubernetes binaries the local cluster needs from the k8s.io/kubernetes Go module,
# pinned to one release (K8S_VERSION, default in versions.env), and caches them outside the repo,
# one directory per release. Reuses the cache when it is complete. Modules are verified against the
# Go checksum database as always; a release whose modules do not verify fails here. A release that
# needs an older Go: K8S_GOTOOLCHAIN=go1.2x.y (the module proxy serves the toolchain).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
# shellcheck source=go-modules.sh
source "$here/go-modules.sh"
out=${K8S_BIN_DIR:-$HOME/.cache/sidecar-terminator/k8s-$K8S_VERSION/bin}
components=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)

is_complete() {
  local c
  for c in "${components[@]}"; do [ -x "$out/$c" ] || return 1; done
}
if is_complete; then echo "$out"; exit 0; fi
# One build per release at a time (CI builds the newest in the background while the oldest's suite
# runs): a second caller waits for the first, then finds the cache complete.
mkdir -p "$(dirname "$out")"
exec 8>>"$(dirname "$out")/.build.lock"
flock 8
if is_complete; then echo "$out"; exit 0; fi

export PATH=/usr/local/go/bin:$PATH GOFLAGS=-mod=mod GOTOOLCHAIN=${K8S_GOTOOLCHAIN:-local}
# Progress on stderr (stdout is the result): the first build takes about 10 minutes on 2 cores.
steps=$(( ${#components[@]} + 1 ))
t0=$SECONDS
say() { echo "build-k8s: [$1/$steps, $(( (SECONDS - t0) / 60 ))m$(( (SECONDS - t0) % 60 ))s] $2" >&2; }
# A line every 30 s while a long step runs (on stderr only: stdout is captured by the caller).
# Stopped quietly: the beat ends its own sleep and exits 0 on SIGTERM, so no shell reports a job
# killed by a signal ("Terminated") in the progress output.
beat=
heartbeat() {
  (trap 'kill "$!" 2>/dev/null; exit 0' TERM; while :; do sleep 30 & wait "$!"; say "$1" "$2: still working"; done) >&2 &
  beat=$!
}
quiet() {
  if [ -n "$beat" ]; then kill "$beat" 2>/dev/null; wait "$beat" 2>/dev/null || true; beat=; fi
  return 0
}
echo "build-k8s: building Kubernetes $K8S_VERSION from its Go module with $(go version | cut -d' ' -f3) into $out (first run only: about 10 minutes on 2 cores, most of it the first component)" >&2
work=$(mktemp -d)
trap 'quiet; rm -rf "$work"' EXIT
cd "$work"
say 1 "downloading and verifying the modules"
heartbeat 1 "downloading and verifying the modules"
k8s_resolve "$K8S_VERSION" build-k8s
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
go mod tidy -e >/dev/null 2>&1 || true
go get "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
packages=()
for c in "${components[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
imported=$(go list -e -deps -f '{{.ImportPath}}' "${packages[@]}" | unserved_imports)
quiet
if [ -n "$imported" ]; then
  echo "build-k8s: the Kubernetes $K8S_VERSION binaries import $(echo $imported), which the module proxy no longer serves at any ${K8S_VERSION%.*} patch: $K8S_VERSION cannot be built here" >&2
  exit 1
fi

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
mkdir -p "$out"
# providerless: without the in-tree cloud providers, which a local cluster never uses and some of
# whose modules the module proxy does not serve (k8s.io/legacy-cloud-providers v0.29.6).
step=1
for c in "${components[@]}"; do
  step=$((step + 1))
  [ -x "$out/$c" ] && continue
  start=$(date +%s)
  say "$step" "building $c"
  heartbeat "$step" "building $c"
  CGO_ENABLED=0 go build -trimpath -tags providerless -ldflags "$ldflags" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  quiet
  mv "$out/$c.tmp" "$out/$c"
  say "$step" "built $c in $(( $(date +%s) - start ))s"
done
echo "$out"
