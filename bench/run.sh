#!/usr/bin/env bash
# `npm run bench`: every part on the newest supported release (on containerd 2, part 1 beside
# native sidecars), then part 1 (latency, ours alone) on the oldest (on Debian's containerd 1.6),
# then parts 1 and 2 on the newest with three nodes (the same Jobs spread over three kubelets),
# each on a local cluster of its own (e2e/run.sh, which picks the containerd). All write
# bench/results.json, which records each run's release, runtime and nodes. The kruise part (the
# agent beside OpenKruise's kruise-daemon) runs on the one-node run of the newest release only.
# BENCH_NODES: the cluster sizes to run on (default "1 3"): 1 runs the one-node runs above; 2..4
# parts 1 and 2 (those in BENCH_PARTS) on that many nodes, into latencyNodes and burstNodes, and
# with part 2 the burst of 300 (burstLargeNodes; BENCH_PARTS=burstLarge runs it alone).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../e2e/cluster/versions.env
source e2e/cluster/versions.env
parts=",${BENCH_PARTS:-latency,burst,scale,kruise,soak},"
for nodes in ${BENCH_NODES:-1 3}; do
  if [[ $nodes == 1 ]]; then
    # The kruise part's kruise-daemon, built (or found cached) before the cluster comes up: a failed
    # build stops the run before it has cost a cluster.
    if [[ $parts == *,kruise,* ]]; then bash bench/build-kruise-daemon.sh >/dev/null; fi
    K8S_VERSION=$K8S_NEWEST bash e2e/run.sh node bench/run.ts
    if [[ $parts == *,latency,* ]]; then
      K8S_VERSION=$K8S_OLDEST BENCH_PARTS=latency bash e2e/run.sh node bench/run.ts
    fi
    continue
  fi
  spread=()
  for part in latency burst burstLarge; do
    if [[ $parts == *,$part,* ]]; then spread+=("$part"); fi
  done
  if [[ ${#spread[@]} -gt 0 ]]; then
    K8S_VERSION=$K8S_NEWEST ST_NODES=$nodes BENCH_PARTS=$(IFS=,; echo "${spread[*]}") bash e2e/run.sh node bench/run.ts
  fi
done
