#!/bin/sh
# tests/deps.sh — installs, with apt-get, the Debian packages kiln's tests
# use, skipping those already present. Run as root (CI is); otherwise it
# prints the command to run and carries on, and the tests that need a
# missing toolchain say so and count as failures.
#
# gcc libc6-dev make        native build, ASan/UBSan
# clang lld llvm            clang build; wasm32 compile, link (wasm-ld), archive (llvm-ar)
# wasi-libc libclang-rt-14-dev-wasm32   libc and builtins for wasm32-wasi
# nodejs                    runs the wasm tests through node:wasi
# gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm   Cortex-M build and run
# tcc libtcc-dev            backend tcc: libtcc.a and <libtcc.h>, tcc's runtime and headers
# libopenblas-dev           kiln bench gemm's peer (cblas_sgemm, opened with dlopen)
# dataset-fashion-mnist     kiln train's data (make demo; test_io reads its test set)
# python3-torch             make bench's PyTorch peer (tests/bench/torch_peer.py): only with
#                           the argument "bench" (sh tests/deps.sh bench), as make bench runs it
pkgs="gcc libc6-dev make clang lld llvm wasi-libc libclang-rt-14-dev-wasm32 nodejs
      gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm tcc libtcc-dev libopenblas-dev dataset-fashion-mnist"
[ "$1" = bench ] && pkgs="$pkgs python3-torch"
missing=""
for p in $pkgs; do
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
