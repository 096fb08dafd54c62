#!/bin/sh
# test_install.sh — `make install` puts kiln.h, libkiln.a, the kiln CLI and
# kiln.pc where GNU's conventions say (PREFIX, staged under DESTDIR), and a
# program builds against that copy alone with `pkg-config --cflags --libs
# kiln`: examples/first.c, copied away from the source tree, built and run.
# Then `make uninstall` takes the files away again.
#
# Installs from the build directory KN_BUILD (tests/run.sh passes its own;
# default build), which is up to date when the suite runs; KN_BUILD_OPT is
# the OPT it was built with (make asan passes its sanitizers, which kiln.pc
# then asks for at link time). Run from the repository root (tests/run.sh
# does): sh tests/test_install.sh
unset MAKEFLAGS MFLAGS MAKELEVEL
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-install-XXXXXX") || { echo "install: 0 passed, 1 failed"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
B=${KN_BUILD:-build}
OPT=${KN_BUILD_OPT:--O2 -g}
CC=${CC:-cc}
version=$(sed -n 's/^#define KN_VERSION "\(.*\)"/\1/p' src/kiln.h)

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL install: $*"; }
# step NAME CMD...: run CMD, its output shown only if it fails
step() {
    name=$1
    shift
    if "$@" >"$tmp/log" 2>&1; then return 0; fi
    bad "$name: $*"
    tail -n 15 "$tmp/log" | sed 's/^/    | /'
    return 1
}
# first NAME: build first.c with pkg-config's flags (PKG_CONFIG_* set by the caller), run it
# and check its four rows of a softmax (each summing to 1)
first() {
    step "$1: pkg-config" sh -c 'pkg-config --cflags --libs kiln >"$0/flags"' "$tmp" || return
    step "$1: build first.c" sh -c "$CC -o '$tmp/first' '$tmp/src/first.c' \$(cat '$tmp/flags')" || return
    step "$1: run first" sh -c "'$tmp/first' >'$tmp/first.out'" || return
    if awk 'NF == 2 && ($1 + $2 - 1) ^ 2 < 1e-6 { n++ } END { exit !(n == 4 && NR == 4) }' "$tmp/first.out"; then
        ok
    else
        bad "$1: first.c printed no softmax"
        sed 's/^/    | /' "$tmp/first.out"
    fi
}

if ! command -v pkg-config >/dev/null; then
    echo "SKIP install: pkg-config not installed (apt-get install pkg-config)"
    [ "${KN_ALLOW_SKIP:-0}" = 1 ] || fail=1
    echo "install: $pass passed, $fail failed"
    [ $fail -eq 0 ]
    exit
fi
mkdir "$tmp/src"
cp examples/first.c "$tmp/src/" # away from src/kiln.h: only the installed header can serve

# PREFIX alone: the files, the CLI, kiln.pc, and a program built against them
p=$tmp/usr
if step "make install PREFIX" ${MAKE:-make} --no-print-directory install B="$B" OPT="$OPT" PREFIX="$p"; then
    for f in bin/kiln lib/libkiln.a include/kiln.h lib/pkgconfig/kiln.pc; do
        if [ -f "$p/$f" ]; then ok; else bad "no $p/$f"; fi
    done
    if [ -x "$p/bin/kiln" ] && [ "$("$p/bin/kiln" --version 2>&1)" = "kiln $version" ]; then
        ok
    else
        bad "$p/bin/kiln --version: $("$p/bin/kiln" --version 2>&1 | head -n 1)"
    fi
    v=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --modversion kiln 2>&1)
    if [ "$v" = "$version" ]; then ok; else bad "pkg-config --modversion kiln: $v, not $version"; fi
    PKG_CONFIG_PATH=$p/lib/pkgconfig first PREFIX
    if step "make uninstall" ${MAKE:-make} --no-print-directory uninstall PREFIX="$p"; then
        left=$(find "$p" -type f | sed "s|^$p/||" | tr '\n' ' ')
        if [ -z "$left" ]; then ok; else bad "make uninstall left $left"; fi
    fi
fi

# DESTDIR stages the files under DESTDIR/PREFIX; kiln.pc names PREFIX alone,
# and a sysroot-aware pkg-config finds the staged copy
d=$tmp/stage
if step "make install DESTDIR" ${MAKE:-make} --no-print-directory install B="$B" OPT="$OPT" DESTDIR="$d" \
        PREFIX=/opt/kiln; then
    pc=$d/opt/kiln/lib/pkgconfig/kiln.pc
    if [ -f "$d/opt/kiln/include/kiln.h" ] && [ -f "$pc" ] && grep -qx 'prefix=/opt/kiln' "$pc" &&
            ! grep -q "$tmp" "$pc"; then
        ok
    else
        bad "kiln.pc under DESTDIR should name prefix=/opt/kiln and no staging path:"
        sed 's/^/    | /' "$pc" 2>/dev/null
    fi
    PKG_CONFIG_LIBDIR=$d/opt/kiln/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$d first DESTDIR
fi
echo "install: $pass passed, $fail failed"
[ $fail -eq 0 ]
