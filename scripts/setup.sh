#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine: the container runtimes,
# etcd and CNI plugins from Debian, containerd 2 built from its Go module (the integration tests
# and the newest releases' clusters run it beside Debian's 1.6), and the npm packages (which bring
# Node 24). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t packages < <(grep -v '^#' scripts/debian-packages.txt)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "setup: Go is needed to build Kubernetes and containerd 2 (expected at /usr/local/go)" >&2; exit 1; }

containerd2=$(bash e2e/cluster/build-containerd.sh)

if [ ! -x node_modules/.bin/node ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
echo "setup: done (node $(node_modules/.bin/node --version), $(go version | cut -d' ' -f3), containerd 2 in $containerd2)"
