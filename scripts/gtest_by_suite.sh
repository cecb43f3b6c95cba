#!/usr/bin/env bash
# Runs a GoogleTest binary one test suite per process, so that a kernel fault (a sticky CUDA
# error such as an illegal address, which fails every later CUDA call of its process) costs only
# its own suite's results. Prints each suite's output, then one summary line; exits 1 when a suite
# failed or crashed.
# Usage: scripts/gtest_by_suite.sh BINARY [-NEGATIVE_PATTERNS]
#   -NEGATIVE_PATTERNS: a gtest negative filter ('-A.*:B.x*'), left out of every suite.
set -uo pipefail
usage() {
  echo "usage: $0 BINARY [-NEGATIVE_PATTERNS]" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
binary=$1
exclude=${2:-}
case "$exclude" in "" | -*) ;; *) usage ;; esac
mapfile -t suites < <("$binary" --gtest_list_tests --gtest_filter="*$exclude" | awk '/^[^ ]/ && $1 ~ /\.$/ { print $1 }')
if [ ${#suites[@]} -eq 0 ]; then
  echo "[ SUITES   ] no test suite listed by $binary: FAILED"
  exit 1
fi
failed=()
for suite in "${suites[@]}"; do
  echo "=== suite ${suite%.}"
  "$binary" --gtest_filter="${suite}*$exclude" || failed+=("${suite%.}")
done
if [ ${#failed[@]} -eq 0 ]; then
  echo "[ SUITES   ] ${#suites[@]} suites in their own processes: all PASSED"
  exit 0
fi
echo "[ SUITES   ] ${#suites[@]} suites in their own processes, ${#failed[@]} FAILED: ${failed[*]}"
exit 1
