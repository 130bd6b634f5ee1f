# How the Go-built tools' module sets are resolved from the Go module proxy (sourced, not run):
# build-k8s.sh builds from what k8s_resolve writes, and check-sources.sh resolves the same with an
# empty module cache, so that no cached module stands in for the proxy.
# shellcheck shell=bash

# The patch release of module $1 to use for staging version $2 (v0.MINOR.PATCH): the release's own,
# else the nearest earlier one the proxy serves. Asks for the version's metadata only.
served_patch() {
  local m=$1 minor=${2%.*} patch=${2##*.}
  while [ "$patch" -ge 0 ]; do
    if go list -m "$m@$minor.$patch" >/dev/null 2>&1; then echo "$minor.$patch"; return 0; fi
    patch=$((patch - 1))
  done
  return 1
}

# In the current (empty) directory, writes a go.mod that requires k8s.io/kubernetes@$1 and pins each
# of its staging modules: as a dependency, k8s.io/kubernetes' own `replace ./staging/...` lines do
# not apply. The proxy refuses some staging modules at some patch releases (k8s.io/kube-scheduler
# v0.31.14): such a module is taken at the nearest earlier patch it serves, and within a minor
# release the staging modules' APIs do not change. A staging module of which no patch of the minor
# is served (k8s.io/sample-cli-plugin v0.27.x) is replaced by an empty local module, listed in
# ./unserved.txt: a build may go on only if none of its binaries imports it (unserved_imports).
# Fetches metadata (.info, .mod) only. $2 names the caller in what it says on stderr.
k8s_resolve() {
  local version=$1 who=$2 staging modfile m served
  staging="v0.${version#v1.}"
  go mod init local/k8s-build >/dev/null 2>&1
  modfile=$(go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$version") || {
    echo "$who: the module proxy serves no k8s.io/kubernetes $version" >&2
    return 1
  }
  : >unserved.txt
  for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$modfile" | awk '{print $1}'); do
    if served=$(served_patch "$m" "$staging"); then
      [ "$served" = "$staging" ] || echo "$who: $m $staging is not served; using $served" >&2
      go mod edit -replace "$m=$m@$served"
    else
      echo "$who: the module proxy serves no $m ${staging%.*}.x; an empty local module stands in for it (allowed only while no binary imports it)" >&2
      mkdir -p "unserved/$m"
      printf 'module %s\n' "$m" >"unserved/$m/go.mod"
      go mod edit -replace "$m=./unserved/$m"
      echo "$m" >>unserved.txt
    fi
  done
  go mod edit -require "k8s.io/kubernetes@$version"
}

# Prints each module of ./unserved.txt that one of the import paths on stdin lies in.
unserved_imports() {
  local imports m
  imports=$(cat)
  while read -r m; do
    [ -n "$m" ] || continue
    grep -qE "^${m//./\\.}(/|$)" <<<"$imports" && echo "$m"
  done <unserved.txt
  return 0
}
