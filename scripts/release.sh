#!/usr/bin/env bash
# `npm run release [-- OUT_DIR]`: what a release ships, built on this machine into one directory
# (default release/VERSION/, which git ignores), VERSION being package.json's:
#   sidecar-terminator-VERSION.tgz                 the Helm chart, packaged (helm package)
#   sidecar-terminator-VERSION-linux-ARCH.tar      the project image, the Dockerfile built by
#                                                  `docker build` (e2e/images/build-dockerfile.sh),
#                                                  `docker save` of ghcr.io/sidecar-terminator/sidecar-terminator:VERSION
#   quick-exit-VERSION-linux-ARCH.tar              the quick-exit image, an OCI archive of
#                                                  ghcr.io/sidecar-terminator/quick-exit:VERSION (e2e/images/build.sh)
#   sidecar-terminator-VERSION.cdx.json            SBOM, CycloneDX: the production dependencies of
#                                                  package-lock.json (npm sbom)
#   SHA256SUMS                                     of the files above (sha256sum -c SHA256SUMS)
# ARCH is this machine's (amd64 or arm64): the images for the other come from `npm run image`, which
# pushes both (docs/releasing.md). helm is built on first use (e2e/cluster/build-helm.sh), or HELM
# names one. Prints each file and the seconds taken.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/package.json")
[ -n "$version" ] || { echo "release.sh: package.json has no version" >&2; exit 1; }
out=${1:-$repo/release/$version}
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "release.sh: $out is not empty: remove it first" >&2
  exit 1
fi
# shellcheck source=e2e/images/node-runtime.sh
source "$repo/e2e/images/node-runtime.sh"
arch=$(node_runtime_arch)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "release.sh: warning: the checkout has uncommitted changes; the image reports the commit HEAD" >&2
fi
started=$SECONDS
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

helm=${HELM:-$(bash "$repo/e2e/cluster/build-helm.sh")}
"$helm" package "$repo/manifests/helm/sidecar-terminator" --destination "$out" >/dev/null

IMAGE="ghcr.io/sidecar-terminator/sidecar-terminator:$version" bash "$repo/e2e/images/build-dockerfile.sh" "$work/project"
mv "$work/project/sidecar-terminator-docker.tar" "$out/sidecar-terminator-$version-linux-$arch.tar"
chmod 644 "$out/sidecar-terminator-$version-linux-$arch.tar"
QUICK_EXIT_IMAGE="ghcr.io/sidecar-terminator/quick-exit:$version" bash "$repo/e2e/images/build.sh" "$work/images"
mv "$work/images/quick-exit.tar" "$out/quick-exit-$version-linux-$arch.tar"

# npm names the SBOM's subject after the directory it runs in.
mkdir "$work/sidecar-terminator"
cp "$repo/package.json" "$repo/package-lock.json" "$work/sidecar-terminator/"
(cd "$work/sidecar-terminator" && npm sbom --sbom-format cyclonedx --sbom-type application --omit dev --package-lock-only) \
  > "$out/sidecar-terminator-$version.cdx.json"

(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $version in $out ($((SECONDS - started)) s):"
(cd "$out" && ls -l --block-size=K -- *)
