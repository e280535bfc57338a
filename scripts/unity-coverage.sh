#!/usr/bin/env bash
# unity-coverage.sh UNITY_BUILD_DIR FILE_BY_FILE_BUILD_DIR — checks that every source file a unity
# build compiles (for `all`) is also compiled on its own somewhere: in that build (targets with
# UNITY_BUILD OFF) or in the second build, configured with CMAKE_UNITY_BUILD=OFF. A unity build
# hides a missing #include; test.sh runs this after its main (unity) and ASan (file by file) stages.
set -euo pipefail
unity_dir=${1:?usage: unity-coverage.sh UNITY_BUILD_DIR FILE_BY_FILE_BUILD_DIR}
alone_dir=${2:?usage: unity-coverage.sh UNITY_BUILD_DIR FILE_BY_FILE_BUILD_DIR}

# The files each build's compile commands name after -c, for the default target.
compiled() { ninja -C "$1" -t commands all | grep -oE ' -c [^ ]+' | sed 's/^ -c //' | sort -u; }

mapfile -t unity_units < <(compiled "$unity_dir" | grep -E '/Unity/unity_[0-9]+_[a-z]+\.[a-z]+$' || true)
alone=$(
  { compiled "$unity_dir" | grep -vE '/Unity/unity_[0-9]+_[a-z]+\.[a-z]+$' || true; compiled "$alone_dir"; } |
    xargs -r realpath -m | sort -u
)
# A unity source is a list of `#include "<absolute path>"` lines, one per file of the target; a unit
# of one file compiles that file on its own.
inside=""
single=""
for u in "${unity_units[@]}"; do
  f=$u; [[ $f = /* ]] || f=$unity_dir/$f
  files=$(sed -n 's/^#include "\(.*\)"$/\1/p' "$f" | xargs -r realpath -m)
  inside+=$files$'\n'
  (($(wc -l <<<"$files") == 1)) && single+=$files$'\n'
done
inside=$(sort -u <<<"$inside")
alone=$(printf '%s\n%s\n' "$alone" "$single" | sort -u)
missing=$(comm -23 <(echo "$inside") <(echo "$alone") | sed '/^$/d')
n_inside=$(echo "$inside" | sed '/^$/d' | wc -l)
if [[ -n "$missing" ]]; then
  echo "unity-coverage: $(echo "$missing" | wc -l) of $n_inside files compiled only inside a unity build:"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
echo "unity-coverage: all $n_inside files of $unity_dir's unity units are also compiled on their own"
