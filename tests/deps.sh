#!/bin/sh
# tests/deps.sh — installs, with apt-get, the Debian packages kiln's tests
# use, skipping those already present. Run as root (CI is); otherwise it
# prints the command to run and carries on, and the tests that need a
# missing toolchain say so and count as failures.
#
#     sh tests/deps.sh [GROUP...]     GROUP: native, wasm, arm, bench; none: native wasm arm
#
# Each make target that builds or runs installs its groups first (make test
# and make asan all three, as test_amalgamation.sh cross-compiles; make wasm
# wasm, make arm arm, make cross wasm and arm, make bench bench), so that it
# works on a fresh machine.
#
# native: gcc libc6-dev make   native build, ASan/UBSan
#         tcc libtcc-dev       backend tcc: libtcc.a and <libtcc.h>, tcc's runtime and headers
#         libopenblas-dev      kiln bench gemm's peer (cblas_sgemm, opened with dlopen)
#         dataset-fashion-mnist  kiln train's data (make demo; test_io reads its test set)
#         zlib1g-dev           zlib, which inflates the dataset's .gz files (kiln CLI, test_io)
#         python3 pkg-config   make amalgamation's generator; make install's kiln.pc, tried
# wasm:   clang lld llvm       wasm32 compile, link (wasm-ld), archive (llvm-ar); the clang build
#         wasi-libc libclang-rt-14-dev-wasm32   libc and builtins for wasm32-wasi
#         nodejs               runs the wasm tests through node:wasi
#         emscripten           builds the amalgamation with emcc (test_amalgamation.sh)
# arm:    gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm   Cortex-M build and run
# bench:  native's, and python3-torch: make bench's PyTorch peer (tests/bench/torch_peer.py)
native="gcc libc6-dev make tcc libtcc-dev libopenblas-dev dataset-fashion-mnist zlib1g-dev python3 pkg-config"
wasm="clang lld llvm wasi-libc libclang-rt-14-dev-wasm32 nodejs emscripten"
arm="gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
[ $# -eq 0 ] && set -- native wasm arm
pkgs=""
for g in "$@"; do
    case $g in
    native) pkgs="$pkgs $native" ;;
    wasm) pkgs="$pkgs $wasm" ;;
    arm) pkgs="$pkgs $arm" ;;
    bench) pkgs="$pkgs $native python3-torch" ;;
    *) echo "deps: unknown group '$g' (native, wasm, arm, bench)"; exit 2 ;;
    esac
done
missing=""
for p in $pkgs; do
    case " $missing " in *" $p "*) continue ;; esac
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: missing packages:$missing"
    echo "deps: install them with: apt-get install -y --no-install-recommends$missing"
    exit 0
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null
