#!/usr/bin/env bash
# check_install.sh BUILD_DIR SCRATCH — `cmake --install` of BUILD_DIR into SCRATCH/prefix, then as a
# user would: the installed commands answer --help, and a program of someone else's
# (tests/install/consumer) finds the probe with find_package(rankscope), links the C++ probe and the
# C ABI, and each writes a run directory that the installed rankscope reads.
set -euo pipefail
build=${1:?usage: check_install.sh BUILD_DIR SCRATCH}
scratch=${2:?usage: check_install.sh BUILD_DIR SCRATCH}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch" && mkdir -p "$scratch"
prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for tool in hangdoctor rankscope; do
  help=$("$prefix/bin/$tool" --help)  # whole, before grep: grep -q may leave a writer a broken pipe
  grep -q "usage" <<<"$help" || { echo "installed $tool --help has no usage line"; exit 1; }
done
test -f "$prefix/share/rankscope/rankscope_probe.py"
cmake -S "$here/consumer" -B "$scratch/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
for user in c_user cpp_user; do
  "$scratch/consumer/$user" "$scratch/run-$user"
  test -s "$scratch/run-$user/rank00000.flight"
  "$prefix/bin/rankscope" inspect "$scratch/run-$user" >/dev/null
done
# The C ABI's program finds the installed library through the RPATH CMake gave it at build time.
libs=$(ldd "$scratch/consumer/c_user")
grep -qF "$prefix/lib/librankscope-probe.so" <<<"$libs" || { echo "c_user does not load the installed probe: $libs"; exit 1; }
echo "check_install: installed commands, the CMake package, the C++ probe and the C ABI work from $prefix"
