#!/usr/bin/env bash
# `npm test`: the unit and integration tests, in two groups that run at the same time.
# - A file whose first line is `// test group: serial — <why>` starts a daemon of its own (a private
#   containerd or dockerd, a docker build): these run one at a time, their output as it comes.
# - Every other file runs beside them, ST_TEST_CONCURRENCY at a time (default 4); its output is
#   printed when the group is done.
# Extra arguments go to both `node --test` runs (e.g. --test-name-pattern=...); `--list` prints each
# file's group (`serial FILE` or `rest FILE`) and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
shopt -s globstar nullglob
serial=() rest=()
for f in test/**/*.test.ts common/**/*.test.ts api/**/*.test.ts rules/**/*.test.ts agent/**/*.test.ts crr/**/*.test.ts bench/**/*.test.ts; do
  if head -1 "$f" | grep -q '^// test group: serial'; then serial+=("$f"); else rest+=("$f"); fi
done
if [ "${1:-}" = --list ]; then
  printf 'serial %s\n' "${serial[@]}"
  printf 'rest %s\n' "${rest[@]}"
  exit 0
fi

rest_out=$(mktemp)
trap 'rm -f "$rest_out"' EXIT
t0=$SECONDS
node --test --test-concurrency="${ST_TEST_CONCURRENCY:-4}" "$@" "${rest[@]}" >"$rest_out" 2>&1 &
rest_pid=$!
serial_status=0
node --test --test-concurrency=1 "$@" "${serial[@]}" || serial_status=$?
echo "test: the ${#serial[@]} files with daemons of their own, one at a time, exited $serial_status after $((SECONDS - t0))s"
rest_status=0
wait "$rest_pid" || rest_status=$?
cat "$rest_out"
echo "test: the other ${#rest[@]} files, ${ST_TEST_CONCURRENCY:-4} at a time, exited $rest_status"
[ "$serial_status" = 0 ] && [ "$rest_status" = 0 ]
