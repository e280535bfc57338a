#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages rankscope needs, only those missing.
# Idempotent and quiet when everything is there. Run by ./test.sh (everything) and ./demo.sh
# (`--demo`: only what builds and runs the trainer and the tools, no test tools, browser or Slurm).
# The CUDA toolkit (nvcc, NCCL, CUPTI, NVTX) is not installed here: it is used when present.
set -euo pipefail

demo=0
[[ "${1:-}" == --demo ]] && demo=1

packages=(
  cmake ninja-build g++ pkg-config make
  libfmt-dev nlohmann-json3-dev rapidjson-dev zlib1g-dev
  libopenmpi-dev openmpi-bin libopenblas-dev libpcre2-dev
  libjs-chart.js libsqlite3-dev
  libdw-dev
)
# libdw-dev: the libdwfl.h header the probe's in-process stack symbolizer is compiled against; the
# library itself is dlopen'ed at run time when present, so programs built here run without it.
# The tests' own tools: GoogleTest, the schema validator, the stack tools the watchdog tests use;
# clang-format: scripts/check-format.sh holds the lines a change touches to .clang-format.
if ((!demo)); then packages+=(libgtest-dev libgmock-dev python3-jsonschema elfutils gdb clang-format); fi
# Headless Chromium renders the HTML report in its test.
if ((!demo)) && [[ "${RANKSCOPE_NO_BROWSER:-0}" != 1 ]]; then packages+=(chromium); fi
# The four-node Slurm of the multi-node tests (scripts/slurm-cluster.sh, tests/slurm/; jq reads
# hangdoctor's JSON there); RANKSCOPE_NO_SLURM=1 leaves them out. They are optional: where they do
# not install (a daemon's postinst refused in some container), the multi-node tests skip with one line.
optional=()
if ((!demo)) && [[ "${RANKSCOPE_NO_SLURM:-0}" != 1 ]]; then optional+=(slurmctld slurmd slurm-client munge jq); fi

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t missing_optional < <(missing_of "${optional[@]}")
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
if ((${#missing[@]} + ${#missing_optional[@]})); then "${sudo_cmd[@]}" apt-get update -qq; fi
if ((${#missing[@]})); then
  echo "rankscope: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ((${#missing_optional[@]})); then
  echo "rankscope: installing ${missing_optional[*]} (optional)"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing_optional[@]}" >/dev/null ||
    echo "rankscope: ${missing_optional[*]} did not install; the tests that need them will skip"
fi
