#!/usr/bin/env bash
# Builds the project image offline (no registry, no `docker build`), with what the Dockerfile packages:
#   /app/dist          `npm run build` output (one minified module, main.js, and its source map)
#   /app/node_modules  only the packages the bundle leaves external (dockerode, loaded on nodes with
#                      a Docker socket) and what they need at run time, from `npm ci --omit=dev
#                      --ignore-scripts`, without TypeScript files and maps (scripts/runtime-modules.ts)
#   /app/proto         the CRI and containerd events protos, loaded at run time by agent/runtime/
#   /app/package.json  ("type": "module")
# plus a Node 24 runtime in the layout of gcr.io/distroless/nodejs24-debian12: the binary of the
# `node` npm package (our devDependency) at /nodejs/bin/node and the shared libraries `ldd` names,
# /etc/passwd with a non-root user 65532, and /tmp.
#   OUT_DIR/sidecar-terminator.tar  OCI archive, sidecar-terminator.local/sidecar-terminator:dev
#   (override the name with IMAGE=...), user 65532:65532,
#   entrypoint ["/nodejs/bin/node", "--enable-source-maps", "/app/dist/main.js"]: pass `agent` or
#   `controller` and flags.
# Usage: build-project-image.sh OUT_DIR. Import with `ctr -n k8s.io images import OUT_DIR/sidecar-terminator.tar`.
# The dependencies come from npm's cache when present (--prefer-offline), else the npm registry.
set -euo pipefail
out=${1:?usage: build-project-image.sh OUT_DIR}
image=${IMAGE:-sidecar-terminator.local/sidecar-terminator:dev}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=e2e/images/oci.sh
source "$here/oci.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=e2e/images/node-runtime.sh
source "$here/node-runtime.sh"
node_bin=$(node_runtime_binary "$repo") || exit 1
node_version=$("$node_bin" --version)
OCI_ARCH=$(node_runtime_arch) || exit 1
export OCI_ARCH

root="$work/rootfs"
app="$root/app"
mkdir -p "$app"

# The application, bundled as `npm run build` does it, and the packages it imports (as the Dockerfile).
(cd "$repo" && npm run --silent build -- "$app/dist" "$work/meta.json")
cp -r "$repo/proto" "$app/proto"
cp "$repo/package.json" "$app/package.json"
mkdir "$work/npm"
cp "$repo/package.json" "$repo/package-lock.json" "$work/npm/"
(cd "$work/npm" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
"$node_bin" "$repo/scripts/runtime-modules.ts" "$work/meta.json" "$work/npm" "$app" >/dev/null

node_runtime "$root" "$node_bin"
chmod -R u+rwX,go+rX,go-w "$root/app"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/layer.tar" -C "$root" .
unpacked=$(oci_size "$work/layer.tar")
gzip -n -6 "$work/layer.tar"
oci_archive "$out/sidecar-terminator.tar" "$image" "$work/layer.tar.gz" \
  '"User":"65532:65532","WorkingDir":"/app","Entrypoint":["/nodejs/bin/node","--enable-source-maps","/app/dist/main.js"]'

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "built $image (node $node_version, $OCI_ARCH): $out/sidecar-terminator.tar $(mib "$(oci_size "$out/sidecar-terminator.tar")"), unpacked $(mib "$unpacked")"
