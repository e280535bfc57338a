#!/usr/bin/env bash
# package-check.sh [deb] [wheel] — builds rankscope's packages and tries them as a user would, away
# from the build tree (docs/INSTALL.md):
#   deb    the self-contained Release build, `cpack -G DEB`, then `apt install ./rankscope_*.deb` in a
#          minimal Debian made by debootstrap (no build tree, no -dev package, no compiler), where
#          hangdoctor and rankscope run on the real files and must say what the build tree's do.
#   wheel  `pip wheel` (scikit-build-core from PyPI), `pip install` into a fresh venv, the same
#          comparison there, `import rankscope_probe`, and ldd of what the wheel holds.
# Both by default. Needs the network for Debian's and PyPI's packages, and build/bin/{hangdoctor,
# rankscope} from ./demo.sh or ./test.sh to compare with. Work goes to build-package/ (or
# $RANKSCOPE_PACKAGE_WORK). The packages are built from the commit checked out (git archive HEAD),
# never from uncommitted files. Exits non-zero on the first difference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${RANKSCOPE_PACKAGE_WORK:-$root/build-package}
ref=$root/build/bin
what=("$@")
((${#what[@]})) || what=(deb wheel)
mkdir -p "$work"
src=$work/src
rm -rf "$src" && mkdir -p "$src"
git -C "$root" archive --format=tar HEAD | tar -x -C "$src"
phase() { echo "== $* (${SECONDS} s in)"; }
die() { echo "package-check: $*" >&2; exit 1; }
[[ -x $ref/hangdoctor && -x $ref/rankscope ]] || die "no build/bin/hangdoctor to compare with: run ./demo.sh first"

# The inputs every package is tried on: real files of other people's jobs and of ours (shared/data,
# beside the checkout, where present) and the committed fixtures. Each line: a command and its
# arguments, paths relative to the data folder that is copied beside the binaries.
data=$work/data
rm -rf "$data" && mkdir -p "$data"
cases=()
if [[ -d $root/../shared/data/real-peers ]]; then
  cp -r "$root/../shared/data/real-peers/megatron-moe-fr" "$root/../shared/data/real-peers/nccl-logs" "$data/"
  cp -r "$root/../shared/data/real-gpu/torch-fr" "$data/torch-fr-real"
  cases+=("hangdoctor megatron-moe-fr/gpu_error_2nd" "hangdoctor megatron-moe-fr/lock_gil_1st"
          "hangdoctor nccl-logs/nccltests-degraded.log" "hangdoctor torch-fr-real/nccl-timeout-timing")
fi
cp -r "$root/tests/fixtures/torch_fr" "$data/fixtures-torch_fr"
cp -r "$root/tests/fixtures/logs" "$data/fixtures-logs"
while IFS= read -r dir; do cases+=("hangdoctor ${dir#"$data"/}"); done < <(
  find "$data/fixtures-torch_fr" -mindepth 1 -maxdepth 1 -type d | sort | head -20)
while IFS= read -r log; do cases+=("hangdoctor ${log#"$data"/}"); done < <(
  find "$data/fixtures-logs" -maxdepth 2 -name '*.log' | sort | head -20)
cases+=("rankscope --help" "hangdoctor --help")

# run_cases BIN_DIR DATA_DIR OUT_FILE [WRAPPER...]: every case's exit status and text, the data
# folder's path replaced by DATA so that two places compare.
run_cases() {
  local bin=$1 dir=$2 out=$3; shift 3
  : >"$out"
  for c in "${cases[@]}"; do
    read -r -a argv <<<"$c"
    local tool=${argv[0]} args=() a
    for a in "${argv[@]:1}"; do [[ $a == -* ]] && args+=("$a") || args+=("$dir/$a"); done
    local rc=0 text
    text=$("$@" "$bin/$tool" "${args[@]}" 2>&1) || rc=$?
    printf '### %s -> exit %d\n%s\n' "$c" "$rc" "${text//$dir/DATA}" >>"$out"
  done
}

phase "the build tree's verdicts (${#cases[@]} inputs)"
run_cases "$ref" "$data" "$work/expected.txt"

check_same() {
  if ! diff -u "$work/expected.txt" "$1" >"$1.diff"; then
    head -40 "$1.diff" >&2
    die "$2 says something else than the build tree (whole diff: $1.diff)"
  fi
  echo "package-check: $2: the same text and exit status as the build tree on all ${#cases[@]} inputs"
}

for w in "${what[@]}"; do
  case $w in
  deb)
    phase "deb: the self-contained Release build"
    cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_SELF_CONTAINED=ON \
      -DRANKSCOPE_BUILD_TESTS=OFF -DRANKSCOPE_BUILD_TRAINER=OFF -DRANKSCOPE_WITH_CUDA=AUTO \
      -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 >/dev/null
    cmake --build "$work/build" -j"$(nproc)"
    (cd "$work/build" && cpack -G DEB >/dev/null)
    deb=$(ls "$work"/build/rankscope_*_amd64.deb)
    dpkg-deb -f "$deb" Package Version Depends
    phase "deb: a minimal Debian without the build tree or any -dev package"
    rootfs=$work/rootfs
    if [[ ! -x $rootfs/usr/bin/apt-get ]]; then
      command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
      rm -rf "$rootfs"
      debootstrap --variant=minbase "$(. /etc/os-release && echo "$VERSION_CODENAME")" "$rootfs" >"$work/debootstrap.log"
    fi
    chroot "$rootfs" dpkg --purge rankscope >/dev/null 2>&1 || true
    cp "$deb" "$rootfs/tmp/"
    rm -rf "$rootfs/data" && cp -r "$data" "$rootfs/data"
    chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "/tmp/$(basename "$deb")" >/dev/null
    if chroot "$rootfs" sh -c 'ls /usr/lib/x86_64-linux-gnu/libfmt* /usr/include/c++ 2>/dev/null' | grep -q .; then
      die "the minimal root has fmt or a C++ toolchain: not the machine this check means"
    fi
    chroot "$rootfs" sh -c 'ldd /usr/bin/hangdoctor /usr/bin/rankscope /usr/lib/librankscope-nccl.so /usr/lib/librankscope-probe.so'
    run_cases /usr/bin /data "$work/deb.txt" chroot "$rootfs"
    check_same "$work/deb.txt" "the .deb in a minimal Debian"
    ;;
  wheel)
    phase "wheel: pip wheel (scikit-build-core)"
    venv=$work/venv-build
    [[ -x $venv/bin/pip ]] || python3 -m venv "$venv"
    rm -rf "$work/wheels"
    "$venv/bin/pip" wheel -q --wheel-dir "$work/wheels" "$src"
    wheel=$(ls "$work"/wheels/rankscope-*.whl)
    echo "$(basename "$wheel"): $(du -h "$wheel" | cut -f1)"
    phase "wheel: a fresh venv"
    rm -rf "$work/venv-user" && python3 -m venv "$work/venv-user"
    "$work/venv-user/bin/pip" install -q "$wheel"
    (cd / && "$work/venv-user/bin/python" -c "import rankscope_probe, os; print('import rankscope_probe:', os.path.dirname(rankscope_probe.__file__))")
    site=$("$work/venv-user/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    ldd "$work/venv-user/bin/hangdoctor" "$work/venv-user/bin/rankscope" "$site"/librankscope-*.so
    run_cases "$work/venv-user/bin" "$data" "$work/wheel.txt"
    check_same "$work/wheel.txt" "the wheel in a fresh venv"
    ;;
  *) die "unknown part '$w' (deb, wheel)" ;;
  esac
done
phase "done"
