#!/usr/bin/env bash
# Prints the e2e files' times that e2e/support/file-times.ts appended to FILE, slowest first, for
# each release and node count.
set -euo pipefail
times=${1:?usage: file-times.sh FILE}
[ -s "$times" ] || { echo "e2e: no file times in $times"; exit 0; }
cut -f1,2 "$times" | sort -u -V | while IFS=$'\t' read -r release nodes; do
  echo "e2e: file times on Kubernetes $release, $nodes node(s), slowest first:"
  awk -F'\t' -v r="$release" -v n="$nodes" '$1 == r && $2 == n { printf "  %5ds  %s%s\n", $4, $3, ($5 == "fail" ? "  (failed)" : "") }' "$times" | sort -rn
done
