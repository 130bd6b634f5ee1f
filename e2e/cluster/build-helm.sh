#!/usr/bin/env bash
# Builds helm (v3) from the helm.sh/helm/v3 Go module, pinned to one release, and caches the binary
# outside the repo; prints its path. Reuses the cache when the binary is there. The module is
# fetched through the Go module proxy and verified against the Go checksum database, like the
# Kubernetes modules of build-k8s.sh; it builds with the machine's Go (GOTOOLCHAIN=local).
# HELM_VERSION in the environment picks another release (cached per version); HELM_BIN_DIR another
# cache directory.
set -euo pipefail
# shellcheck source=versions.env
source "$(dirname "$0")/versions.env"
out=${HELM_BIN_DIR:-$HOME/.cache/sidecar-terminator/helm-$HELM_VERSION}
if [ -x "$out/helm" ]; then echo "$out/helm"; exit 0; fi
# One build at a time (CI builds it in the background): a second caller waits, then finds it built.
mkdir -p "$out"
exec 8>>"$out/.build.lock"
flock 8
if [ -x "$out/helm" ]; then echo "$out/helm"; exit 0; fi

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
# helm's go.mod names the client-go release it is built against; helm's own build passes it (as
# Kubernetes 1.<minor>) to the version `helm template` and `helm lint` assume without a cluster.
download=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION") \
  || { echo "build-helm: could not download helm.sh/helm/v3@$HELM_VERSION: $(echo "$download" | sed -n 's/.*"Error": "\(.*\)".*/\1/p')" >&2; exit 1; }
modfile=$(echo "$download" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$modfile")
k8s_minor=${client_go#v0.}; k8s_minor=${k8s_minor%%.*}
[ -n "$k8s_minor" ] || { echo "build-helm: no k8s.io/client-go in $modfile" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
# `go install module@version` builds with exactly the module's own go.mod (no replace directives in
# helm's), outside any module of ours.
GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mkdir -p "$out"
mv "$work/helm" "$out/helm.tmp"
mv "$out/helm.tmp" "$out/helm"
echo "built helm $HELM_VERSION in $(( $(date +%s) - start ))s" >&2
echo "$out/helm"
