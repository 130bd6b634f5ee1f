#!/usr/bin/env bash
# End-to-end tests against a real local cluster:
#   builds (or reuses) the Kubernetes binaries, brings the cluster up, runs e2e/*.test.ts on one
#   node (or e2e/nodes/*.test.ts on ST_NODES=2..4 nodes), and always tears the cluster down,
#   exiting with the tests' status.
# Run as `npm run e2e` (root): the suite runs on the oldest and on the newest supported release
# (e2e/cluster/versions.env), and the many-node tests on the newest with three nodes. The newest
# runs in a network of its own (cluster/own-network.sh), beside the other two: it starts when the
# oldest's shared files are done, and the three nodes start when the oldest is down.
# `K8S_VERSION=v1.x.y npm run e2e` runs the suite on one release (`ST_NODES=3` for the many-node
# tests there, 1.30+).
# ST_CLUSTER_DIR overrides the state directory (the newest's is the same with -own-network after
# it); ST_E2E_TESTS (space-separated files or globs) runs a subset.
# Each test file says its group on its first line, `// e2e group: shared` or `// e2e group: serial
# — why`: the shared files (the standard deployment and namespaces of their own only) run side by
# side, ST_E2E_CONCURRENCY at a time (default 4: 249 to 289 s for the shared files on 2 cores;
# other numbers not yet measured against it); then the serial ones (they disturb the cluster or the
# deployment), one at a time. A file with no group fails the run before the cluster comes up. Each
# file's time is appended to ST_E2E_TIMES when set (`<release>\t<nodes>\t<file>\t<seconds>\t<pass|fail>`),
# and printed, slowest first, at the end.
# `run.sh COMMAND...` runs COMMAND with the cluster up instead of the tests (the demo and the
# benchmark do), on K8S_VERSION (default: the newest).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

if [ $# -eq 0 ] && [ -z "${K8S_VERSION:-}" ]; then
  # shellcheck source=cluster/versions.env
  source e2e/cluster/versions.env
  ST_E2E_TIMES=${ST_E2E_TIMES:-$(mktemp)}
  export ST_E2E_TIMES
  # The three runs overlap where the machine has room: the newest release starts in a network of its
  # own (cluster/own-network.sh) once the oldest's shared files are done (the serial ones mostly
  # wait), and the three nodes on the host's network once the oldest is down. Each line they print
  # starts with its run's name.
  runs=$(mktemp -d)
  trap 'rm -rf "$runs"' EXIT
  # run_named NAME COMMAND...: COMMAND's output, each line after "[NAME] "; its status in $runs.
  run_named() {
    local name=$1 status=0
    shift
    { "$@" 2>&1 || status=$?; echo "$status" >"$runs/$name.status"; } | sed -u "s|^|[$name] |"
  }
  # The helm test's release directory, made once here on the host's network when not given (its
  # image build installs npm packages, which the newest's own network cannot reach).
  if [ -z "${ST_RELEASE_DIR:-}" ]; then
    bash scripts/release.sh "$runs/release"
    export ST_RELEASE_DIR=$runs/release
  fi
  oldest_shared_done=$runs/oldest-shared-done
  run_named "$K8S_OLDEST" env K8S_VERSION="$K8S_OLDEST" ST_NODES=1 ST_E2E_SHARED_DONE="$oldest_shared_done" bash "$0" &
  oldest=$!
  (
    while [ ! -e "$oldest_shared_done" ] && kill -0 "$oldest" 2>/dev/null; do sleep 1; done
    # Built (or waited for) on the host's network: nothing is reached from its own.
    for build in build-k8s build-helm build-containerd; do
      K8S_VERSION=$K8S_NEWEST bash "e2e/cluster/$build.sh" >/dev/null
    done
    own_state=${ST_CLUSTER_DIR:-/tmp/sidecar-terminator-cluster}-own-network
    lock=${ST_E2E_LOCK:-/tmp/sidecar-terminator-e2e.lock}
    run_named "$K8S_NEWEST" env K8S_VERSION="$K8S_NEWEST" ST_NODES=1 ST_CLUSTER_DIR="$own_state" \
      ST_E2E_LOCK="${lock%.lock}-own-network.lock" bash e2e/cluster/own-network.sh bash "$0"
  ) &
  newest=$!
  wait "$oldest"
  run_named "$K8S_NEWEST, three nodes" env K8S_VERSION="$K8S_NEWEST" ST_NODES=3 bash "$0"
  wait "$newest"
  bash e2e/file-times.sh "$ST_E2E_TIMES"
  failed=()
  for name in "$K8S_OLDEST" "$K8S_NEWEST" "$K8S_NEWEST, three nodes"; do
    [ "$(cat "$runs/$name.status" 2>/dev/null)" = 0 ] || failed+=("$name")
  done
  [ ${#failed[@]} -eq 0 ] || { printf 'e2e: failed on Kubernetes %s\n' "${failed[@]}" >&2; exit 1; }
  exit 0
fi
# One release from here on: K8S_VERSION, or the newest (versions.env) when unset.
# shellcheck source=cluster/versions.env
source e2e/cluster/versions.env
export K8S_VERSION
# The project's Node 24 (npm puts it first on PATH; this also covers a direct `bash e2e/run.sh`).
export PATH="$repo/node_modules/.bin:$PATH"
t0=$(date +%s)

# The test files and their groups, before anything is built or started.
if [ $# -eq 0 ]; then
  if [ "${ST_NODES:-1}" = 1 ]; then default_tests="e2e/*.test.ts"; else default_tests="e2e/nodes/*.test.ts"; fi
  read -r -a patterns <<<"${ST_E2E_TESTS:-$default_tests}"
  shared=() serial=() ungrouped=()
  for f in $(printf '%s\n' "${patterns[@]}"); do
    case $(sed -n '1s%^// e2e group: \(shared\|serial\).*%\1%p' "$f") in
      shared) shared+=("$f") ;;
      serial) serial+=("$f") ;;
      *) ungrouped+=("$f") ;;
    esac
  done
  if [ ${#ungrouped[@]} -gt 0 ]; then
    printf 'e2e: %s has no group: its first line must be "// e2e group: shared" or "// e2e group: serial — why"\n' "${ungrouped[@]}" >&2
    exit 1
  fi
fi

# One cluster per machine (fixed ports): concurrent runs wait for each other. The lock is on fd 9,
# which the cluster's processes must not inherit (9>&- below).
lock=${ST_E2E_LOCK:-/tmp/sidecar-terminator-e2e.lock}
exec 9>>"$lock"
if ! flock -n 9; then
  echo "e2e: another e2e run holds $lock; waiting (up to 60 min)" >&2
  flock -w 3600 9 || { echo "e2e: gave up waiting for $lock" >&2; exit 1; }
fi

K8S_BIN_DIR=$(bash e2e/cluster/build-k8s.sh 9>&-)
export K8S_BIN_DIR
# The helm e2e test's helm, built before the cluster comes up (a failed build stops the run early).
[ $# -gt 0 ] || bash e2e/cluster/build-helm.sh 9>&- >/dev/null
state=${ST_CLUSTER_DIR:-/tmp/sidecar-terminator-cluster}

teardown() {
  local rc=$?
  trap - EXIT INT TERM
  bash e2e/cluster/down.sh 9>&- || echo "e2e: teardown reported problems" >&2
  echo "e2e: finished in $(( $(date +%s) - t0 ))s, exit $rc"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash e2e/cluster/up.sh 9>&-
# shellcheck source=/dev/null
source "$state/env"

if [ $# -gt 0 ]; then
  echo "e2e: Kubernetes $K8S_VERSION on ${ST_NODES:-1} node(s), node $(node --version), running $*"
  t_tests=$(date +%s)
  set +e
  "$@" 9>&-
  status=$?
  set -e
  echo "e2e: $1 exited $status after $(( $(date +%s) - t_tests ))s"
  exit "$status"
fi

# Deployed once before the files start: each deploys it again in its before(), which then changes
# nothing, so shared files started together do not race to create it.
node --input-type=module -e "import { deployProject } from './e2e/support/deploy.ts'; await deployProject();" 9>&-
times=${ST_E2E_TIMES:-$state/e2e-times.tsv}
run_group() {
  local group=$1 concurrency=$2
  shift 2
  [ $# -gt 0 ] || return 0
  echo "e2e: Kubernetes $K8S_VERSION on ${ST_NODES:-1} node(s), node $(node --version), the $group files, $concurrency at a time: $*"
  local t_group status
  t_group=$(date +%s)
  set +e
  ST_E2E_RELEASE="$K8S_VERSION" ST_E2E_NODES="${ST_NODES:-1}" ST_E2E_TIMES_OUT="$times" \
    node --test --test-concurrency="$concurrency" \
      --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=./e2e/support/file-times.ts --test-reporter-destination=stderr \
      "$@" 9>&-
  status=$?
  set -e
  echo "e2e: the $group files exited $status after $(( $(date +%s) - t_group ))s"
  return "$status"
}
# The shared files start largest first (their size in bytes stands in for their time), so that the
# long ones do not start last and run on alone.
mapfile -t shared < <(for f in "${shared[@]}"; do printf '%s %s\n' "$(wc -c <"$f")" "$f"; done | sort -rn | cut -d' ' -f2)
status=0
run_group shared "${ST_E2E_CONCURRENCY:-4}" "${shared[@]}" || status=1
[ -z "${ST_E2E_SHARED_DONE:-}" ] || touch "$ST_E2E_SHARED_DONE"
run_group serial 1 "${serial[@]}" || status=1
[ -n "${ST_E2E_TIMES:-}" ] || bash e2e/file-times.sh "$times"
exit "$status"
