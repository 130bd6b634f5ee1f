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

node_bin=$(readlink -f "$repo/node_modules/node/bin/node" 2>/dev/null || true)
[ -x "$node_bin" ] || { echo "build-project-image.sh: no Node binary at node_modules/node/bin/node: run scripts/setup.sh" >&2; exit 1; }
node_version=$("$node_bin" --version)
case $node_version in v24.*) ;; *) echo "build-project-image.sh: expected Node 24, found $node_version" >&2; exit 1 ;; esac
case $(uname -m) in
  x86_64) export OCI_ARCH=amd64 ;;
  aarch64) export OCI_ARCH=arm64 ;;
  *) echo "build-project-image.sh: unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac

root="$work/rootfs"
app="$root/app"
mkdir -p "$app" "$root/nodejs/bin" "$root/etc" "$root/tmp"

# The application, bundled as `npm run build` does it, and the packages it imports (as the Dockerfile).
(cd "$repo" && npm run --silent build -- "$app/dist" "$work/meta.json")
cp -r "$repo/proto" "$app/proto"
cp "$repo/package.json" "$app/package.json"
mkdir "$work/npm"
cp "$repo/package.json" "$repo/package-lock.json" "$work/npm/"
(cd "$work/npm" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
"$node_bin" "$repo/scripts/runtime-modules.ts" "$work/meta.json" "$work/npm" "$app" >/dev/null

# The runtime: the node binary and the libraries it links (ldd resolves them on this machine).
cp "$node_bin" "$root/nodejs/bin/node"
node_pkg=$(dirname "$(dirname "$node_bin")")
[ -f "$node_pkg/LICENSE" ] && cp "$node_pkg/LICENSE" "$root/nodejs/LICENSE"
ldd "$node_bin" | while read -r first second third _; do
  lib=
  if [ "$second" = "=>" ]; then lib=$third; elif [[ $first == /* ]]; then lib=$first; fi
  [ -n "$lib" ] && [[ $lib == /* ]] || continue
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || [ -e "$root/lib/ld-linux-aarch64.so.1" ] ||
  { echo "build-project-image.sh: ldd named no dynamic loader for $node_bin" >&2; exit 1; }

cat > "$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat > "$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
echo 'hosts: files dns' > "$root/etc/nsswitch.conf"
chmod 1777 "$root/tmp"
chmod -R u+rwX,go+rX,go-w "$root/app" "$root/nodejs"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/layer.tar" -C "$root" .
unpacked=$(oci_size "$work/layer.tar")
gzip -n -6 "$work/layer.tar"
oci_archive "$out/sidecar-terminator.tar" "$image" "$work/layer.tar.gz" \
  '"User":"65532:65532","WorkingDir":"/app","Entrypoint":["/nodejs/bin/node","--enable-source-maps","/app/dist/main.js"]'

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "built $image (node $node_version, $OCI_ARCH): $out/sidecar-terminator.tar $(mib "$(oci_size "$out/sidecar-terminator.tar")"), unpacked $(mib "$unpacked")"
