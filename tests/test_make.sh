#!/bin/sh
# test_make.sh — every make target that builds or runs the tests or the
# benchmarks installs what it needs first (tests/deps.sh), so that it works
# on a fresh machine: make test, asan, wasm, arm, cross and bench.
#
# A fresh machine is played by stubs first on PATH: dpkg says no package is
# installed, id says root, apt-get logs what it is asked and then fails its
# install (so the target stops there), and the compilers (CC, WASM_CC,
# ARM_CC, and clang and arm-none-eabi-gcc, which tests/run.sh probes) log
# and fail. The first thing each target does must be apt-get, asked for the
# packages that target needs. Nothing is installed or built. Run from the
# repository root (tests/run.sh does): sh tests/test_make.sh
unset MAKEFLAGS MFLAGS MAKELEVEL
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-make-XXXXXX") || { echo "make: 0 passed, 1 failed"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
log=$tmp/log
stub() { # NAME BODY
    printf '#!/bin/sh\n%s\n' "$2" >"$tmp/bin/$1"
    chmod +x "$tmp/bin/$1"
}
stub dpkg 'exit 1'
stub id 'echo 0'
stub apt-get "echo \"apt-get \$*\" >>'$log'; [ \"\$1\" = update ]"
for c in cc clang arm-none-eabi-gcc; do stub $c "echo \"$c \$*\" >>'$log'; exit 1"; done

# check TARGET PACKAGE...: make TARGET's first logged command installs the packages
check() {
    target=$1
    shift
    : >"$log"
    PATH="$tmp/bin:$PATH" make --no-print-directory "$target" B="$tmp/build" CC="$tmp/bin/cc" \
        WASM_CC="$tmp/bin/cc" ARM_CC="$tmp/bin/cc" KN_ALLOW_SKIP=1 >"$tmp/out" 2>&1 </dev/null
    first=$(grep -v '^apt-get update' "$log" | head -n 1)
    ok=1
    case $first in "apt-get install "*) ;; *) ok=0 ;; esac
    for p in "$@"; do
        case " $first " in *" $p "*) ;; *) ok=0 ;; esac
    done
    if [ $ok = 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL make $target: expected apt-get to install $* before anything else; first: ${first:-nothing}"
        tail -n 5 "$tmp/out" | sed 's/^/    | /'
    fi
}

check test tcc libtcc-dev zlib1g-dev python3 pkg-config clang wasi-libc nodejs emscripten gcc-arm-none-eabi qemu-system-arm
check asan gcc tcc libtcc-dev zlib1g-dev python3 pkg-config clang emscripten gcc-arm-none-eabi qemu-system-arm
check wasm clang lld llvm wasi-libc libclang-rt-14-dev-wasm32 nodejs emscripten
check arm gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
check cross clang wasi-libc nodejs gcc-arm-none-eabi qemu-system-arm
check bench tcc libtcc-dev libopenblas-dev python3-torch
check bench-rounds tcc libtcc-dev python3-torch
echo "make: $pass passed, $fail failed"
[ $fail -eq 0 ]
