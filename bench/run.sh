#!/usr/bin/env bash
# `npm run bench`: every part on the newest supported release, then part 1 (latency, ours alone) on
# the oldest, each on a local cluster of its own (e2e/run.sh). Both write bench/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../e2e/cluster/versions.env
source e2e/cluster/versions.env
K8S_VERSION=$K8S_NEWEST bash e2e/run.sh node bench/run.ts
if [[ ",${BENCH_PARTS:-latency}," == *,latency,* ]]; then
  K8S_VERSION=$K8S_OLDEST BENCH_PARTS=latency bash e2e/run.sh node bench/run.ts
fi
