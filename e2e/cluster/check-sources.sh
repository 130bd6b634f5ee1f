#!/usr/bin/env bash
# Checks, in seconds and without compiling, that everything the tests build or install still comes
# from where a fresh machine gets it: the module sets of the oldest and newest Kubernetes releases
# (resolved as build-k8s.sh resolves them), containerd 2, helm and promtool from the Go module proxy,
# every package of package-lock.json from the npm registry, and every package of
# scripts/debian-packages.txt from Debian's archive. The Go modules resolve into an empty module
# cache, and the npm packages are asked of the registry itself, so neither a cache nor a cached build
# on this machine stands in for where a fresh machine gets them. Exits 1 naming each source that no
# longer resolves. .ci/run runs it first.
# ST_CHECK_ONLY="kubernetes npm ..." runs only the named checks (kubernetes, containerd, helm,
# promtool, npm, debian; default all): its own test checks the Kubernetes releases alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go-modules.sh
source "$here/go-modules.sh"
export PATH=/usr/local/go/bin:$PATH GOFLAGS=-mod=mod GOTOOLCHAIN=local
cache=$HOME/.cache/sidecar-terminator
scratch=$(mktemp -d)
# The module cache's files are read-only.
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
export GOMODCACHE=$scratch/mod
t0=$SECONDS

# A Kubernetes release: its staging modules pinned as build-k8s.sh pins them, then its whole module
# graph. A staging module no longer served fails the check when a cached build of the release
# contains it (a fresh machine could not build that release); without a cached build, build-k8s.sh
# finds out whether its binaries import it.
check_k8s() {
  local version=$1 bins m contained
  mkdir "$scratch/k8s-$version" && cd "$scratch/k8s-$version"
  GOTOOLCHAIN=${K8S_GOTOOLCHAIN:-local} k8s_resolve "$version" "check-sources: Kubernetes $version"
  bins=$cache/k8s-$version/bin
  if [ -s unserved.txt ] && [ -d "$bins" ]; then
    contained=$(go version -m "$bins"/* 2>/dev/null | awk '$1 == "dep" { print $2 }' | sort -u | unserved_imports)
    for m in $contained; do
      echo "check-sources: the cached Kubernetes $version binaries (in $bins) contain $m, which the module proxy no longer serves: a fresh machine cannot build $version" >&2
    done
    [ -z "$contained" ] || return 1
  fi
  GOTOOLCHAIN=${K8S_GOTOOLCHAIN:-local} go list -m all >/dev/null
}

# A tool that `go install module@version` builds with the module's own go.mod: that go.mod's graph.
check_go_tool() {
  local module=$1 version=$2 modfile
  mkdir "$scratch/$(basename "$module")-$version" && cd "$scratch/$(basename "$module")-$version"
  modfile=$(go list -m -f '{{.GoMod}}' "$module@$version")
  cp "$modfile" go.mod && chmod u+w go.mod
  go list -m all >/dev/null
}

# Each name@version of the lock file, asked of the registry (its version document: 404 once unpublished).
# A request that fails at the network is retried, then named with HTTP 000: an exit code of curl's
# alone once ended this check with no word of which package.
check_npm() {
  local registry missing
  registry=$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)
  missing=$(node -e '
    const lock = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const seen = new Set();
    for (const [path, p] of Object.entries(lock.packages)) {
      if (path && !p.link) seen.add(`${path.slice(path.lastIndexOf("node_modules/") + 13)}/${p.version}`);
    }
    console.log([...seen].join("\n"));' "$repo/package-lock.json" |
    { xargs -P 16 -I{} curl -s --retry 4 --retry-all-errors --max-time 60 -o /dev/null \
        -w '%{http_code} {}\n' "${registry%/}/{}" || true; } |
    awk '$1 != 200 { print $2 " (HTTP " $1 ")" }')
  [ -z "$missing" ] || { echo "check-sources: the npm registry serves no $(echo $missing)" >&2; return 1; }
}

check_debian() {
  local p candidate missing=()
  apt-get update -qq
  while read -r p; do
    candidate=$(apt-cache policy "$p" | awk '$1 == "Candidate:" { print $2 }')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ] || missing+=("$p")
  done < <(grep -v '^#' "$repo/scripts/debian-packages.txt")
  [ ${#missing[@]} -eq 0 ] || { echo "check-sources: Debian's archive offers no ${missing[*]}" >&2; return 1; }
}

# Each check in the background with its output kept, then reported in order.
names=() pids=()
run() {
  local name=$1
  shift
  ( "$@" ) >"$scratch/$name.log" 2>&1 &
  names+=("$name") pids+=($!)
}
only=" ${ST_CHECK_ONLY:-kubernetes containerd helm promtool npm debian} "
wanted() { [[ $only == *" $1 "* ]]; }
if wanted kubernetes; then
  run "Kubernetes $K8S_OLDEST" check_k8s "$K8S_OLDEST"
  run "Kubernetes $K8S_NEWEST" check_k8s "$K8S_NEWEST"
fi
! wanted containerd || run "containerd $CONTAINERD2_VERSION" check_go_tool github.com/containerd/containerd/v2 "$CONTAINERD2_VERSION"
! wanted helm || run "helm $HELM_VERSION" check_go_tool helm.sh/helm/v3 "$HELM_VERSION"
! wanted promtool || run "promtool $PROMTOOL_VERSION" check_go_tool github.com/prometheus/prometheus "$PROMTOOL_VERSION"
! wanted npm || run "npm packages" check_npm
! wanted debian || run "Debian packages" check_debian
[ ${#pids[@]} -gt 0 ] || { echo "check-sources: ST_CHECK_ONLY names no check: $ST_CHECK_ONLY" >&2; exit 2; }

failed=()
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "check-sources: ok: ${names[$i]}"
    sed 's/^/  /' "$scratch/${names[$i]}.log"
  else
    failed+=("${names[$i]}")
    echo "check-sources: FAILED: ${names[$i]} no longer resolves from where a fresh machine gets it:" >&2
    sed 's/^/  /' "$scratch/${names[$i]}.log" >&2
  fi
done
echo "check-sources: took $(( SECONDS - t0 ))s"
[ ${#failed[@]} -eq 0 ] || { echo "check-sources: failed: ${failed[*]}" >&2; exit 1; }
