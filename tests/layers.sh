#!/bin/sh
# tests/layers.sh — which file may use which: the layers of docs/ARCHITECTURE.md, checked on the
# sources' #include lines and on the symbols each object of the library references.
#
#     sh tests/layers.sh [OBJDIR]     OBJDIR: a build's obj/ (default build/obj); prints each edge
#                                     that points up a layer, and "layers: P passed, F failed"
#
# A file's layer is the first pattern of LAYERS its path matches; a lower layer never includes a
# header of a higher one nor references a symbol a higher one defines. kiln.h is the public API:
# anyone may include it. The base layer is the port and the hash every layer uses.
LAYERS='
0 port/*|src/hash.*
1 src/rt/*|src/ops.h|src/dot.h|src/gemm_rt.*|src/wino_rt.*|src/conv_rt.*|src/vec_rt.*
2 src/arena.*|src/ctx.*|src/dtype.*|src/tensor.*|src/log.*|src/expr.*|src/prim.*|src/interp.*|src/autodiff.*|src/decomp*|src/graph.*|src/optim.*|src/io.*|src/composite.*|src/core.h
3 src/ir.*|src/loopopt*|src/lower.*|src/sched.*|src/partition.*|src/target.h
4 targets/*
5 src/compile*|src/plan.*|src/autotune.*|src/pcache.*|src/generic.*|src/program.*|src/eager.*
6 src/capture*|src/guards.*|src/dynamic.*
7 src/cli/*
'
NAMES='base rt core loop-ir targets compiler capture cli'
objdir=$(cd "${1:-build/obj}" 2>/dev/null && pwd)
cd "$(dirname "$0")/.." || exit 2

layer_of() { # path -> layer number, or empty (patterns are not globbed)
    echo "$LAYERS" | (set -f; while read -r n pats; do
        [ -n "$n" ] || continue
        old_ifs=$IFS; IFS='|'
        for p in $pats; do
            IFS=$old_ifs
            case $1 in $p) echo "$n"; exit 0 ;; esac
            IFS='|'
        done
        IFS=$old_ifs
    done)
}
name_of() { echo "$NAMES" | cut -d' ' -f$(($1 + 1)); }

pass=0; fail=0
tmp=${TMPDIR:-/tmp}/kiln-layers.$$
trap 'rm -f "$tmp".*' EXIT

# every source and header of the library, with its layer
for f in $(ls port/*.[ch] src/*.[ch] src/*/*.[ch] targets/*/*.[ch] 2>/dev/null); do
    l=$(layer_of "$f")
    [ "$f" = src/kiln.h ] && continue
    if [ -z "$l" ]; then echo "$f" >> "$tmp.nolayer"; continue; fi
    echo "$f $l"
done > "$tmp.files"
if [ -f "$tmp.nolayer" ]; then
    sed 's/$/: in no layer (tests\/layers.sh LAYERS)/; s/^/FAIL /' "$tmp.nolayer"
    fail=$(wc -l < "$tmp.nolayer")
fi

# includes: "x.h" resolved against the including file's folder
while read -r f l; do
    dir=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        h=$(cd "$dir" 2>/dev/null && realpath --relative-to="$OLDPWD" "$inc" 2>/dev/null)
        [ -n "$h" ] && [ -f "$h" ] || continue
        [ "$h" = src/kiln.h ] && continue
        hl=$(awk -v h="$h" '$1 == h { print $2 }' "$tmp.files")
        [ -n "$hl" ] || continue
        if [ "$hl" -gt "$l" ]; then
            echo "FAIL $f ($(name_of "$l")) includes $h ($(name_of "$hl"))"; fail=$((fail + 1))
        else pass=$((pass + 1)); fi
    done
done < "$tmp.files"

# symbols: each object's undefined references against the objects that define them
if [ -n "$objdir" ] && [ -d "$objdir" ]; then
    find "$objdir" -name '*.o' ! -name '*_all.o' | while read -r o; do
        src=${o#"$objdir"/}; src=${src%.o}.c
        [ -f "$src" ] || continue
        nm -P --defined-only "$o" 2>/dev/null | awk -v s="$src" '$2 ~ /^[TDBRC]$/ { print $1, s, "def" }'
        nm -P -u "$o" 2>/dev/null | awk -v s="$src" '{ print $1, s, "use" }'
    done > "$tmp.syms"
    awk 'NR == FNR { layer[$1] = $2; next }
         $3 == "def" { def[$1] = $2; next }
         { use[++n] = $1 " " $2 }
         END {
             for (i = 1; i <= n; i++) {
                 split(use[i], u, " ")
                 d = def[u[1]]
                 if (d == "" || d == u[2] || !(d in layer) || !(u[2] in layer)) continue
                 print u[2], layer[u[2]], d, layer[d], u[1]
             }
         }' "$tmp.files" "$tmp.syms" | sort -u > "$tmp.edges"
    while read -r user ul def dl sym; do
        if [ "$dl" -gt "$ul" ]; then
            echo "FAIL $user ($(name_of "$ul")) calls $sym of $def ($(name_of "$dl"))"; fail=$((fail + 1))
        else pass=$((pass + 1)); fi
    done < "$tmp.edges"
else
    echo "FAIL no objects in ${1:-build/obj} (build first)"; fail=$((fail + 1))
fi
echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
