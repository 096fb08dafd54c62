#!/bin/sh
# test_amalgamation.sh — `make amalgamation` writes kiln.c beside kiln.h, and
# that one file builds with one compiler call for each target: gcc and clang
# (C99, every warning an error), clang for wasm32-wasi, emcc and
# arm-none-eabi-gcc for a Cortex-M4F. With each, examples/first.c is linked
# against it and run (natively, under node, under QEMU), and prints what the
# gcc build prints: four rows of a softmax, each summing to 1.
#
# A missing toolchain prints "SKIP ..." and counts as a failure unless
# KN_ALLOW_SKIP=1, as in tests/run.sh. Builds at -O0: the compilers' checks
# are the same, and a 30,000-line file is compiled five times. Run from the
# repository root (tests/run.sh does): sh tests/test_amalgamation.sh
unset MAKEFLAGS MFLAGS MAKELEVEL
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-amalg-XXXXXX") || { echo "amalgamation: 0 passed, 1 failed"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
root=$(pwd)
am=$tmp/amalgamation
STRICT="-std=c99 -Wall -Wextra -Wpedantic -Werror -O0"
ARM="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL amalgamation: $*"; }
skip() {
    echo "SKIP amalgamation: $*"
    [ "${KN_ALLOW_SKIP:-0}" = 1 ] || fail=$((fail + 1))
}
# step NAME CMD...: run CMD, its output shown only if it fails
step() {
    name=$1
    shift
    if "$@" >"$tmp/log" 2>&1; then return 0; fi
    bad "$name: $*"
    head -n 15 "$tmp/log" | sed 's/^/    | /'
    return 1
}
# softmax FILE: four rows of two probabilities, each row summing to 1
softmax() {
    awk 'NF == 2 && $1 >= 0 && $2 >= 0 && ($1 + $2 - 1) ^ 2 < 1e-6 { n++ } END { exit !(n == 4 && NR == 4) }' "$1"
}
# same NAME FILE: FILE prints what the gcc build printed (to 1e-4: each target has its own libm)
same() {
    if paste "$tmp/gcc.out" "$2" | awk 'NF != 4 || ($1 - $3) ^ 2 > 1e-8 || ($2 - $4) ^ 2 > 1e-8 { bad = 1 } END { exit bad || NR != 4 }'; then
        ok
    else
        bad "$1: first.c printed"
        sed 's/^/    | /' "$2"
    fi
}

if ! command -v "${PYTHON:-python3}" >/dev/null; then
    skip "python3 not installed (apt-get install python3)"
    echo "amalgamation: $pass passed, $fail failed"
    exit 1
fi
if ! step generate ${MAKE:-make} --no-print-directory -s amalgamation B="$tmp"; then
    echo "amalgamation: $pass passed, $fail failed"
    exit 1
fi
# one file and the public header: nothing else of the source tree is included
if [ -f "$am/kiln.h" ] && cmp -s "$am/kiln.h" src/kiln.h &&
        [ "$(grep -c '^ *# *include *"' "$am/kiln.c")" = 1 ] && grep -q '^#include "kiln.h"$' "$am/kiln.c"; then
    ok
else
    bad "kiln.c should include only \"kiln.h\", its copy beside it: $(grep '^ *# *include *"' "$am/kiln.c" | sort -u | head -n 5 | tr '\n' ' ')"
fi
cp examples/first.c "$tmp/first.c"
cd "$am" || exit 1

# gcc: the native reference the others are compared with
if command -v gcc >/dev/null &&
        step gcc gcc $STRICT -c kiln.c -o gcc.o &&
        step "gcc link" gcc -I. "$tmp/first.c" gcc.o -lm -ldl -lpthread -o "$tmp/first-gcc" &&
        step "gcc run" sh -c "'$tmp/first-gcc' >'$tmp/gcc.out'"; then
    if softmax "$tmp/gcc.out"; then ok; else bad "gcc: first.c printed no softmax:"; cat "$tmp/gcc.out"; fi
elif ! command -v gcc >/dev/null; then
    skip "gcc not installed"
fi

if ! command -v clang >/dev/null; then
    skip "clang not installed (apt-get install clang)"
else
    step clang clang $STRICT -c kiln.c -o clang.o &&
        step "clang link" clang -I. "$tmp/first.c" clang.o -lm -ldl -lpthread -o "$tmp/first-clang" &&
        step "clang run" sh -c "'$tmp/first-clang' >'$tmp/clang.out'" && same clang "$tmp/clang.out"
    # wasm32-wasi: the wasm port (no threads, no JIT), run under node's WASI
    if ! printf 'int main(void){return 0;}\n' | clang --target=wasm32-wasi -x c - -o "$tmp/probe.wasm" >/dev/null 2>&1; then
        skip "clang's wasm32-wasi target not installed (apt-get install wasi-libc libclang-rt-14-dev-wasm32 lld)"
    else
        step wasm32 clang --target=wasm32-wasi $STRICT -c kiln.c -o wasm.o &&
            step "wasm32 link" clang --target=wasm32-wasi -I. "$tmp/first.c" wasm.o -lm -o "$tmp/first.wasm" &&
            if command -v node >/dev/null; then
                step "wasm32 run" sh -c "node --no-warnings '$root/tests/cross/run_wasi.js' '$tmp/first.wasm' >'$tmp/wasm.out'" &&
                    same wasm32 "$tmp/wasm.out"
            else
                skip "node not installed (apt-get install nodejs)"
            fi
    fi
fi

# Emscripten: the wasm port too (__EMSCRIPTEN__); one self-contained .js run by node
if ! command -v emcc >/dev/null; then
    skip "emcc not installed (apt-get install emscripten)"
else
    step emcc env NODE_PATH=/usr/share/nodejs emcc $STRICT -c kiln.c -o emcc.o &&
        step "emcc link" env NODE_PATH=/usr/share/nodejs emcc -I. "$tmp/first.c" emcc.o -sSINGLE_FILE=1 \
            -sALLOW_MEMORY_GROWTH=1 -o "$tmp/first-emcc.js" &&
        step "emcc run" sh -c "node '$tmp/first-emcc.js' >'$tmp/emcc.out'" && same emcc "$tmp/emcc.out"
fi

# Cortex-M4F: the bare-metal port, run under QEMU with the test suite's startup code
if ! command -v arm-none-eabi-gcc >/dev/null; then
    skip "arm-none-eabi-gcc not installed (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)"
else
    step arm arm-none-eabi-gcc $ARM $STRICT -c kiln.c -o arm.o &&
        step "arm link" arm-none-eabi-gcc $ARM -I. "$tmp/first.c" "$root/tests/cross/startup.c" arm.o \
            --specs=rdimon.specs -T "$root/tests/cross/cortex-m.ld" -lm -o "$tmp/first.elf" &&
        if command -v qemu-system-arm >/dev/null; then
            step "arm run" sh -c "timeout 60 qemu-system-arm -M mps2-an386 -cpu cortex-m4 \
                -semihosting-config enable=on,target=native -nographic -monitor none -serial none \
                -kernel '$tmp/first.elf' >'$tmp/arm.out'" && same arm "$tmp/arm.out"
        else
            skip "qemu-system-arm not installed (apt-get install qemu-system-arm)"
        fi
fi
echo "amalgamation: $pass passed, $fail failed"
[ $fail -eq 0 ]
