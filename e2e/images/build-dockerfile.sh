#!/usr/bin/env bash
# Builds the shipped Dockerfile, unchanged, with a real `docker build` (BuildKit) on a machine
# without a registry: the two base images its FROM lines name are assembled here first, in their
# layout, and loaded into a private Docker Engine:
#   node:24-bookworm-slim   busybox-static's shell and applets, the Node 24 binary of the `node` npm
#                           package (our devDependency) at /usr/local/bin/node with the libraries
#                           `ldd` names, and this machine's npm at /usr/local/lib/node_modules/npm
#                           (npm and npx in /usr/local/bin), as the official image has them
#   gcr.io/distroless/nodejs24-debian12:nonroot
#                           the same Node at /nodejs/bin/node, users root and nonroot (65532), no
#                           shell (e2e/images/node-runtime.sh, as the offline project image)
# The build's `npm ci` fetches from the npm registry (host network). Writes
#   OUT_DIR/sidecar-terminator-docker.tar  `docker save` of IMAGE (default
#                                          sidecar-terminator.local/sidecar-terminator:VERSION)
# runs the image's --version, and prints its size, its package count and the build's seconds. The Engine (Debian's docker.io) runs in a temp
# directory with its own containerd and is removed afterwards.
# Usage: build-dockerfile.sh OUT_DIR
set -euo pipefail
out=${1:?usage: build-dockerfile.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/package.json")
image=${IMAGE:-sidecar-terminator.local/sidecar-terminator:$version}
# Debian's 20.10 client: it builds with the Engine's own BuildKit (DOCKER_BUILDKIT=1) without the
# buildx plugin that newer clients need.
docker_cli=/usr/bin/docker
dockerd=/usr/sbin/dockerd
npm_dir=$(readlink -f "$(dirname "$(readlink -f "$(command -v npm)")")/..")
[ -x "$dockerd" ] && [ -x "$docker_cli" ] || { echo "build-dockerfile.sh: Debian's docker.io is not installed: run scripts/setup.sh" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "build-dockerfile.sh: /bin/busybox missing: run scripts/setup.sh" >&2; exit 1; }
[ -f "$npm_dir/bin/npm-cli.js" ] || { echo "build-dockerfile.sh: npm's package not found (at $npm_dir)" >&2; exit 1; }
# shellcheck source=e2e/images/node-runtime.sh
source "$here/node-runtime.sh"
node_bin=$(node_runtime_binary "$repo") || exit 1
mkdir -p "$out"
out=$(cd "$out" && pwd)
started=$SECONDS

work=$(mktemp -d /tmp/st-docker-build-XXXXXX)
# dockerd makes /run/docker/plugins whatever its --exec-root: removed after unless it was there.
run_docker_existed=0
[ ! -e /run/docker ] || run_docker_existed=1
socket="$work/docker.sock"
docker() { DOCKER_CONFIG="$work/cli" "$docker_cli" -H "unix://$socket" "$@"; }
stop_dockerd() {
  local pid
  if [ -f "$work/docker.pid" ]; then
    pid=$(cat "$work/docker.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  # What dockerd leaves mounted under its data root (overlay layers, its containerd's shm).
  { grep -o " $work/[^ ]*" /proc/mounts || true; } | sort -r | while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  rm -rf "$work"
  [ "$run_docker_existed" = 1 ] || rmdir /run/docker/plugins /run/docker 2>/dev/null || true
}
trap stop_dockerd EXIT

# The bases, each one layer made here.
bases="$work/bases"
mkdir -p "$bases/node/usr/local/bin" "$bases/node/usr/local/lib" "$bases/node/bin" "$bases/node/tmp" "$bases/node/etc" "$bases/distroless"
for applet in $(/bin/busybox --list); do [ "$applet" = busybox ] || ln -s busybox "$bases/node/bin/$applet"; done
cp /bin/busybox "$bases/node/bin/busybox"
# Scripts' `#!/usr/bin/env node` (npm's own) find env there.
ln -s ../bin "$bases/node/usr/bin"
node_runtime "$bases/node" "$node_bin"
mv "$bases/node/nodejs/bin/node" "$bases/node/usr/local/bin/node"
rm -r "$bases/node/nodejs"
mkdir "$bases/node/usr/local/lib/node_modules"
cp -r "$npm_dir" "$bases/node/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$bases/node/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$bases/node/usr/local/bin/npx"
sed -i 's|:/sbin/nologin$|:/bin/sh|' "$bases/node/etc/passwd"
# This machine's trust store, which Node takes beside its own CAs: npm ci then reaches the registry
# wherever the host does (behind a TLS-inspecting proxy too).
mkdir -p "$bases/node/etc/ssl/certs"
[ ! -f /etc/ssl/certs/ca-certificates.crt ] || cp /etc/ssl/certs/ca-certificates.crt "$bases/node/etc/ssl/certs/"
node_runtime "$bases/distroless" "$node_bin"
for base in node distroless; do
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$bases/$base.tar" -C "$bases/$base" .
done

mkdir -p "$work/cli"
echo '{}' > "$work/daemon.json"
"$dockerd" --data-root "$work/data" --exec-root "$work/exec" --pidfile "$work/docker.pid" \
  -H "unix://$socket" --config-file "$work/daemon.json" --storage-driver overlay2 \
  --bridge=none --iptables=false --ip6tables=false --ip-masq=false >"$work/dockerd.log" 2>&1 &
for _ in $(seq 300); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
docker version >/dev/null 2>&1 || { tail -n 20 "$work/dockerd.log" >&2; echo "build-dockerfile.sh: dockerd did not start" >&2; exit 1; }

docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' "$bases/node.tar" node:24-bookworm-slim >/dev/null
docker import --change 'USER 65532:65532' --change 'ENTRYPOINT ["/nodejs/bin/node"]' "$bases/distroless.tar" gcr.io/distroless/nodejs24-debian12:nonroot >/dev/null
bases_done=$SECONDS

commit=${SOURCE_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)}
DOCKER_BUILDKIT=1 docker build --network host --progress plain ${commit:+--build-arg "SOURCE_COMMIT=$commit"} \
  -t "$image" "$repo" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; echo "build-dockerfile.sh: docker build failed" >&2; exit 1; }
build_done=$SECONDS
docker save -o "$out/sidecar-terminator-docker.tar" "$image"
# The image's node_modules, to count its packages.
container=$(docker create "$image")
docker cp "$container:/app/node_modules" "$work/node_modules"
docker rm "$container" >/dev/null
# It runs: Node starts the bundle, which reports its version and commit.
docker run --rm --network none "$image" --version
size=$(docker image inspect -f '{{.Size}}' "$image")
manifests=$(find "$work/node_modules" -name package.json -regextype egrep -regex '.*/node_modules/(@[^/]+/)?[^/@]+/package.json')
packages=$(wc -l <<<"$manifests")
# scripts/runtime-modules.ts STAND_IN_VERSION
stand_ins=$(xargs grep -l '"version": "0.0.0-left-out"' <<<"$manifests" | wc -l)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "built $image with docker build: $(mib "$size"), $packages packages ($stand_ins of them stand-ins) in /app/node_modules ($(mib "$(du -sb "$work/node_modules" | cut -f1)")); bases $((bases_done - started)) s, docker build $((build_done - bases_done)) s"
echo "  $out/sidecar-terminator-docker.tar ($(mib "$(stat -c %s "$out/sidecar-terminator-docker.tar")"))"
