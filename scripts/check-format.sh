#!/usr/bin/env bash
# check-format.sh — the C++ and CUDA lines a change touches, held to .clang-format (Debian's
# clang-format and its git-clang-format). Only those lines: the tree was written before the file and
# is not reformatted at once (that would bury its history), so each change leaves what it touches
# formatted.
#
# Usage: scripts/check-format.sh [BASE]   lines changed since BASE (default HEAD~1, the last commit:
#                                         what CI checks on a clean clone), uncommitted ones included
# Exit 0 when they are formatted (or there is no BASE, as in a clone of one commit), 1 with the
# diff that formats them (apply it with `git clang-format BASE`), 2 when clang-format is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
if ! command -v git-clang-format >/dev/null || ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2
  exit 2
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "check-format: no commit $base to compare with (a clone of one commit): nothing checked"
  exit 0
fi
diff=$(git clang-format --quiet --diff --extensions c,cc,cpp,h,hpp,cu,cuh "$base" 2>&1 || true)
if [[ -z $diff || $diff == *"no modified files to format"* || $diff == *"did not modify any files"* ]]; then
  echo "check-format: the lines changed since $(git rev-parse --short "$base") are formatted"
  exit 0
fi
echo "check-format: lines changed since $(git rev-parse --short "$base") are not formatted as .clang-format says;" \
  "\`git clang-format $base\` formats them:"
echo "$diff"
exit 1
