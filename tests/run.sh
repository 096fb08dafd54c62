#!/bin/sh
# Runs test suites and adds up their "NAME: P passed, F failed" lines.
#
#     sh tests/run.sh DIR                       native tests in DIR/tests
#     sh tests/run.sh native DIR wasm WDIR arm ADIR   any of the three, in order
#
# native: DIR/tests/fuzz_compiled and every executable DIR/tests/test_*, KN_JOBS at a time
#         (default: the processors), then one at a time every tests/test_*.sh (tests of the build itself; KN_BUILD=DIR names the build
#         for those that install it), then tests/layers.sh on DIR/obj.
# wasm:   builds WDIR (make wasm-build), runs WDIR/tests/test_*.wasm under node, KN_JOBS at a time.
# arm:    builds ADIR (make arm-build), runs ADIR/arm_smoke.elf under QEMU.
# A program that crashes, exits nonzero or prints no summary counts as one
# failure; so does a test that did not build, and a missing cross toolchain
# (one "SKIP ..." line) unless KN_ALLOW_SKIP=1. The last line is always
# "N passed, M failed", over everything run; the exit status is 0 iff M is 0.
MAKE=${MAKE:-make}
pass=0; fail=0
HANG_GUARD=$(command -v timeout >/dev/null 2>&1 && echo "timeout 600")

# Test programs run KN_JOBS at a time (default: the processors), their summaries counted in order.
# A fifo holds one token per free slot; a program takes one to start and puts it back when done.
JOBS=${KN_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
qdir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-run-XXXXXX") || { echo "run.sh: no temporary directory"; exit 1; }
trap 'rm -rf "$qdir"' EXIT
mkfifo "$qdir/slots" && exec 3<>"$qdir/slots" || { echo "run.sh: no fifo in $qdir"; exit 1; }
i=0; while [ "$i" -lt "$JOBS" ]; do echo >&3; i=$((i + 1)); done
queued=0

# queue NAME CMD...: start CMD from the repository root once a slot is free; drain counts it.
queue() {
    queued=$((queued + 1))
    q=$qdir/$queued
    read -r _ <&3
    printf '%s\n' "$1" >"$q.name"; shift
    # a hang guard, not a timing bound: a program stuck for 10 minutes fails
    ( $HANG_GUARD "$@" >"$q.out" 2>&1 </dev/null 3>&-; echo $? >"$q.rc"; echo >&3 ) &
}

# drain: wait for every queued program, then count each one's summary in the order queued.
drain() {
    wait
    i=1
    while [ "$i" -le "$queued" ]; do
        count "$(cat "$qdir/$i.name")" "$(cat "$qdir/$i.rc" 2>/dev/null || echo 255)" "$qdir/$i.out"
        rm -f "$qdir/$i.name" "$qdir/$i.rc" "$qdir/$i.out"
        i=$((i + 1))
    done
    queued=0
}

# run_one NAME CMD...: run CMD now, alone, and count its summary.
run_one() { queue "$@"; drain; }

# count NAME RC FILE: add up the summary line of NAME's output FILE (RC its exit status).
count() {
    name=$1; rc=$2; out=$(cat "$3")
    [ "$rc" -eq 124 ] && out="$out
$name: killed after 600 s (a hang)"
    line=$(printf '%s\n' "$out" | grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 25 | sed 's/^/  | /'
        echo "$name: crashed or printed no summary (exit $rc)"; fail=$((fail + 1)); return
    fi
    printf '%s\n' "$out" | sed '/: [0-9]* passed, [0-9]* failed$/q' | grep -E '^(FAIL|    )' | head -n 40
    echo "$line"
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.*, ([0-9]+) failed$/\1/')
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        printf '%s\n' "$out" | sed '1,/: [0-9]* passed, [0-9]* failed$/d' | tail -n 15 | sed 's/^/  | /'
        echo "$name: exit $rc"; fail=$((fail + 1))
    fi
}

skip() {
    echo "SKIP $1"
    [ "${KN_ALLOW_SKIP:-0}" = 1 ] || fail=$((fail + 1))
}

# build KIND TARGET DIR: make TARGET with -k, its output shown only on failure
# (which counts once; the tests that did build still run).
build() {
    mkdir -p "$3"
    if ! $MAKE -k --no-print-directory "$2" >"$3/build.log" 2>&1; then
        grep -E 'error|warning|Error' "$3/build.log" | head -n 30 | sed 's/^/  | /'
        echo "$1: build failed (full log: $3/build.log)"; fail=$((fail + 1))
    fi
}

# built FILE: FILE exists and is up to date (after a failed build an old one may
# not be; nor after a source changed while the tests ran).
built() { [ -f "$1" ] && $MAKE -q --no-print-directory "$1" >/dev/null 2>&1; }

native() {
    # the differential fuzzer's fixed seeds first, the longest (make fuzz runs random ones)
    if [ -x "$1/tests/fuzz_compiled" ]; then queue "$1/tests/fuzz_compiled" "$1/tests/fuzz_compiled"; fi
    for t in "$1"/tests/test_*; do
        [ -x "$t" ] || continue
        queue "$t" "$t"
    done
    drain
    # the build's own tests one at a time: they run make and compilers themselves
    for t in tests/test_*.sh; do
        [ -f "$t" ] || continue
        KN_BUILD=$1 run_one "$t" sh "$t"
    done
    # which file may include and call which (docs/ARCHITECTURE.md's layers), on this build's objects
    run_one tests/layers.sh sh tests/layers.sh "$1/obj"
}

wasm() {
    echo "-- wasm32-wasi, under node: $1"
    probe=$1/probe
    mkdir -p "$1"
    if ! command -v clang >/dev/null || ! command -v llvm-ar >/dev/null; then
        skip "wasm: clang or llvm-ar not installed (apt-get install clang llvm)"; return
    fi
    if ! printf '#include <stdio.h>\nint main(void){puts("");return 0;}\n' |
            clang --target=wasm32-wasi -x c - -o "$probe.wasm" >/dev/null 2>&1; then
        skip "wasm: clang wasm32 target not installed (apt-get install wasi-libc libclang-rt-14-dev-wasm32 lld)"
        return
    fi
    if ! command -v node >/dev/null || ! node -e "require('node:wasi')" >/dev/null 2>&1; then
        skip "wasm: node with node:wasi not installed (apt-get install nodejs)"; return
    fi
    build wasm wasm-build "$1"
    if ! built "$1/libkiln.a"; then
        echo "$1/libkiln.a: did not build"; fail=$((fail + 1)); return
    fi
    for c in tests/test_*.c; do
        [ -e "$c" ] || continue
        t=$1/tests/$(basename "$c" .c).wasm
        if ! built "$t"; then
            echo "$t: did not build"; fail=$((fail + 1)); continue
        fi
        queue "$t" node --no-warnings --no-turbo-fast-api-calls tests/cross/run_wasi.js "$t"
    done
    drain
}

arm() {
    echo "-- Cortex-M4F, under qemu-system-arm: $1"
    mkdir -p "$1"
    if ! command -v arm-none-eabi-gcc >/dev/null; then
        skip "arm: arm-none-eabi-gcc not installed (apt-get install gcc-arm-none-eabi)"; return
    fi
    if ! printf 'int main(void){return 0;}\n' |
            arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 \
                --specs=rdimon.specs -x c - -o "$1/probe.elf" >/dev/null 2>&1; then
        skip "arm: newlib for Cortex-M not installed (apt-get install libnewlib-arm-none-eabi)"; return
    fi
    if ! command -v qemu-system-arm >/dev/null; then
        skip "arm: qemu-system-arm not installed (apt-get install qemu-system-arm)"; return
    fi
    build arm arm-build "$1"
    if ! built "$1/arm_smoke.elf"; then
        echo "$1/arm_smoke.elf: did not build"; fail=$((fail + 1)); return
    fi
    # timeout: a fault or a runaway loop would otherwise hang QEMU forever
    run_one "$1/arm_smoke.elf" timeout 60 qemu-system-arm -M mps2-an386 -cpu cortex-m4 \
        -semihosting-config enable=on,target=native -nographic -monitor none -serial none \
        -kernel "$1/arm_smoke.elf"
}

[ $# -eq 1 ] && set -- native "$1"
[ $# -eq 0 ] && set -- native build
while [ $# -ge 2 ]; do
    case $1 in
    native|wasm|arm) "$1" "$2" ;;
    *) echo "run.sh: unknown suite '$1'"; fail=$((fail + 1)) ;;
    esac
    shift 2
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
