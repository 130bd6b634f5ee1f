#!/usr/bin/env bash
# `npm run bench`: every part on the newest supported release (on containerd 2, part 1 beside
# native sidecars), then part 1 (latency, ours alone) on the oldest (on Debian's containerd 1.6),
# each on a local cluster of its own (e2e/run.sh, which picks the containerd). Both write
# bench/results.json, which records each run's release and runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../e2e/cluster/versions.env
source e2e/cluster/versions.env
K8S_VERSION=$K8S_NEWEST bash e2e/run.sh node bench/run.ts
if [[ ",${BENCH_PARTS:-latency}," == *,latency,* ]]; then
  K8S_VERSION=$K8S_OLDEST BENCH_PARTS=latency bash e2e/run.sh node bench/run.ts
fi
