/*
 * ir.h — the loop IR: target-neutral kernels of loop nests over flat
 * buffers, what the scheduler's kernel groups are lowered to and what every
 * target (C/SIMD, WASM, CUDA) renders.
 *
 * A kernel names its buffers and holds a tree of statements. Statements are
 * loops, stores, and reduction accumulators; values are a small interned DAG
 * whose arithmetic mirrors the primitives of ops.h (an IR value carries the
 * Op it computes). Indices are expressions of expr.h over the loop
 * variables, which are its symbols: loop k is symbol s<k>. So index
 * simplification is the expression language's canonical form, and views
 * (reshape, permute, expand, slice, pad) cost nothing but index arithmetic.
 *
 *     kernel k0(in b0 f32[512], in b1 f32[8], out b2 f32[64])
 *       for s0 in 64 parallel
 *         acc a0 f32 sum
 *         for s1 in 8
 *           a0 += mul(b0[s0*8+s1], b1[s1])
 *         b2[s0] = exp(a0)
 *
 * Loops carry a kind that passes set and targets honour: serial, parallel
 * (split across threads), vector(width), unroll(factor), gpu_block,
 * gpu_thread. Passes never change what a kernel computes, only how (but
 * for the rounding of a float sum they regroup: loopopt.h, cascade).
 *
 * The text form above is what ir_print writes and ir_parse reads, so passes
 * are tested with golden dumps; ir_verify checks a kernel's invariants.
 * Grammar (one statement a line, two spaces of indent per level, the header
 * at column 0; spaces between value tokens are optional on input):
 *
 *     kernel = "kernel" NAME "(" [buffer ("," buffer)*] ")" NL stmt*
 *     buffer = ("in" | "out" | "tmp") "b"N DTYPE "[" EXPR "]"     N = 0, 1, ... in order
 *     stmt   = "for" "s"N "in" EXPR [kind]       EXPR without spaces; body one level deeper
 *            | "acc" "a"N DTYPE ("sum" | "max")
 *            | "a"N ("+=" | "max=") value        the accumulator's own op
 *            | "b"N "[" EXPR [";" value] "]" ("=" | "+=") value
 *     kind   = "parallel" | "vector(" W ")" | "unroll(" W ")" | "gpu_block" | "gpu_thread"
 *     value  = "b"N "[" EXPR [";" value] "]" | "a"N | "idx(" EXPR ")"
 *            | "rand(" value "," value "," EXPR ")" | "check(" value "," EXPR ")"
 *            | NUMBER [":" DTYPE] | OPNAME "(" value ("," value)* ")" | "cast." DTYPE "(" value ")"
 *     NUMBER = [-]digits[.digits][e[+-]digits] | [-]inf | nan    shortest text that reads back
 *
 * EXPR is expr.h's text form; OPNAME an elementwise primitive's kn_opinfo
 * name, with exactly its nsrc operands (every op prints prefix: add(x, y));
 * an "a"N value needs its "acc" line above it; numbers N are <= 1000000.
 *
 * Data-dependent indices (gather, scatter_add): "b"N "[" EXPR ";" V "]" is
 * element EXPR + V of the buffer, V an i64 value computed at run time (a
 * loaded index times a stride); "+=" stores b[i] + value into b[i] (an
 * accumulating store: scatter_add; a target may make it atomic). Such an
 * offset is not an index expression, so passes treat it as opaque: a loop
 * whose var it depends on is neither vectorised nor split across threads.
 * rand(K, C, E) is the uniform in [0, 1) at position C + E of the Philox
 * 4x32-10 stream of key K (K and C i64 values: the generator's state, which
 * a kernel loads from buffers; E an index): every target computes it as the
 * interpreter does (interp.c), bit for bit.
 * check(V, N) is V (an integer value) when 0 <= V < N; otherwise it is 0,
 * so the access stays in bounds, and the kernel reports V and N to the
 * code that runs it (each target has its own way: the C target's kernels
 * write them to an error cell passed after the thread pool), which turns
 * the report into an error naming the op. The lowering wraps every index
 * it loads from a buffer in a check, so no access depends on data unchecked.
 *
 * Dtypes in the text: a constant is f32 unless it has a suffix (1:i64,
 * -inf:f64, 1:bool); a load has its buffer's dtype, an accumulator value
 * its declaration's, idx() and check() are i64, rand() f32; an op's result follows the
 * op's rule (below), a cast names its target. So every value's dtype is
 * recoverable and print(parse(print(k))) == print(k) byte for byte.
 */
#ifndef KN_IR_H
#define KN_IR_H

#include "core.h"
#include "expr.h"

typedef uint32_t IrRef; /* index into Kernel.nodes; 0 = none */

#define IR_MAX_NEST 32   /* loops nested in a kernel */
/* Symbols s<IR_SHAPE_SYM + j> in indices, extents and buffer sizes are not
 * loop vars but run-time shape symbols: z<j>, the value of a program's
 * size symbol j at the run (a kernel generic in a dynamic size, compiled
 * once; Kernel.shapes). */
#define IR_SHAPE_SYM 4096
#define IR_MAX_DEPTH 256 /* values nested in a value (print and parse recurse this deep) */

typedef enum {
    IR_LOOP,   /* for var in extent (kind, width); body: first child .. */
    IR_STORE,  /* buf[index] = value */
    IR_ACC,    /* declare accumulator acc: dtype, op OP_SUM or OP_RMAX, starts at 0 or -inf */
    IR_UPDATE, /* acc (+= or max=) value */
    IR_CONST,  /* a number of dtype */
    IR_LOAD,   /* buf[index] */
    IR_ACCVAL, /* the accumulator's current value */
    IR_INDEX,  /* an index expression as a value (iota, masks); i64 */
    IR_OP,     /* op (a unary, binary, compare, where or cast primitive) of up to 3 values */
    IR_RAND,   /* Philox uniform in [0, 1) of key a at stream position b + index; f32 */
    IR_CHECK,  /* a (an integer value) if 0 <= a < index, else 0 and a report; i64 */
    IR_NKINDS
} IrKind;

typedef enum {
    LOOP_SERIAL,   /* one after another */
    LOOP_PARALLEL, /* iterations split across threads */
    LOOP_VECTOR,   /* width lanes at once */
    LOOP_UNROLL,   /* width copies of the body */
    LOOP_GPU_BLOCK,
    LOOP_GPU_THREAD
} LoopKind;

/* Value nodes (CONST, LOAD, ACCVAL, INDEX, OP, RAND, CHECK) are interned: building
 * the same value twice gives the same ref, so CSE is free; an operand is
 * always an older node than its user. Statement nodes (LOOP, STORE, ACC,
 * UPDATE) are never interned. Fields a kind does not use stay 0. */
typedef struct {
    uint8_t kind;   /* IrKind */
    uint8_t dtype;  /* kn_dtype of a value; the loop kind of IR_LOOP */
    uint16_t op;    /* IR_OP: the primitive; IR_ACC, IR_UPDATE: OP_SUM or OP_RMAX; IR_STORE: OP_SUM for
                       "+=", else 0 */
    uint32_t width; /* IR_LOOP: vector width or unroll factor (>= 1); 1 for other kinds */
    IrRef a, b, c;  /* operands (IR_OP, IR_CHECK: a; IR_RAND: a key, b counter), value (IR_STORE, IR_UPDATE:
                       a); a data-dependent offset, 0 if none (IR_LOAD: a, IR_STORE: b) */
    IrRef child;    /* IR_LOOP: first statement of the body */
    IrRef next;     /* statements: the next one in the same block */
    int32_t buf;    /* IR_LOAD, IR_STORE: buffer number */
    int32_t var;    /* IR_LOOP: its symbol; IR_ACC, IR_UPDATE, IR_ACCVAL: accumulator number */
    ExprId index;   /* IR_LOAD, IR_STORE, IR_INDEX, IR_RAND: the index; IR_LOOP: the extent; IR_CHECK: the
                       bound; IR_CONST: 0, or an expression of shape symbols whose value at the run (its
                       reciprocal if op is OP_RECIP) replaces imm (a mean's divisor, a draw's i64 advance of
                       the generator; not in the text form) */
    double imm;     /* IR_CONST: the value (integral for integer dtypes, 0 or 1 for bool) */
} IrNode;

/* A tmp buffer is the kernel's scratch, of a constant size, not the
 * program's memory: a target gives each run of a top-level statement (each
 * thread's range of a parallel loop) its own (the C target: a local array),
 * so an iteration of a loop writes every tmp element it reads before
 * reading it (the marks split loops over threads regardless of tmp); the
 * program passes nothing for it (its node is 0, "none"). */
typedef enum { BUF_IN, BUF_OUT, BUF_TMP } BufRole;

typedef struct {
    uint8_t dtype, role;
    uint8_t shared; /* 1: it may be the memory of another buffer of the kernel marked so, accessed at the same
                       element (an output written in place over the input it replaces: compile.c, "outputs in
                       place"), so a target must not assume they are apart (C: no restrict); not in the text
                       form */
    ExprId size;   /* elements */
    uint32_t node; /* the graph node it holds, for the caller (not in the text form) */
} IrBuf;

typedef struct {
    char name[32];  /* letters, digits and '_' */
    ExprTable *ex;  /* shared by a program's kernels */
    IrNode *nodes;  /* node 0 unused; a ref r is valid when 0 < r < n */
    uint32_t n, cap;
    IrBuf *bufs;
    int nbufs, bufcap;
    IrRef body;     /* the first top-level statement */
    int nvars, naccs;
    Arena *arena;   /* nodes, buffers and the hash table grow here */
    uint32_t *hash; /* open addressing over value refs, 0 = empty */
    uint32_t hcap;  /* a power of two, or 0 before the first value */
    uint8_t shapes; /* shape symbols its expressions read (IR_SHAPE_SYM): targets pass their values at
                       run time (the C target: an int64 array in b[nbufs + 2]); not in the text form */
    uint8_t tile;   /* an epilogue of a dot template (not in the text form): its body is three loops
                       (batch, M, N) that targets run over one tile, NAME(b, t, m0, m1, n0, n1) */
} Kernel;

/* Where the next statement goes: after tail in the body of loop (loop 0:
 * the kernel's top level); tail 0 puts it first in that block. Each
 * statement builder places its statement there and makes it the new tail,
 * so successive calls append in order:
 *
 *     IrBlock top = {0, 0};
 *     IrRef l = ir_loop(k, &top, expr_const(ex, 64), LOOP_PARALLEL, 1);
 *     IrBlock in = {l, 0};
 *     ir_store(k, &in, 1, expr_sym(ex, k->nvars - 1), v);
 */
typedef struct {
    IrRef loop; /* the IR_LOOP whose body this is; 0 = top level */
    IrRef tail; /* the statement to place the next one after; 0 = at the start */
} IrBlock;

/* ---- building ----
 * Every builder returns 0 (-1 for the int ones) and changes nothing when
 * memory runs out or an argument is malformed on its own: a bad dtype, an
 * ExprId that is not in k->ex, an unknown buffer or accumulator, an operand
 * that is not a value of this kernel, a block that is not one. What needs
 * context (scoping, buffer roles, operand dtypes) is ir_verify's job, so a
 * pass can build a wrong kernel and the verifier names the mistake. */
void ir_init(Kernel *k, Arena *a, ExprTable *ex, const char *name); /* other bytes of name become '_' */
int ir_buf(Kernel *k, kn_dtype dt, BufRole role, ExprId size, uint32_t node); /* buffer number or -1 */
IrRef ir_const(Kernel *k, kn_dtype dt, double v); /* integers: integral and in range; bool: v != 0 */
IrRef ir_load(Kernel *k, int buf, ExprId index);  /* the buffer's dtype */
/* element index + off (off an i64 value, or 0: ir_load) */
IrRef ir_load_at(Kernel *k, int buf, ExprId index, IrRef off);
IrRef ir_check(Kernel *k, IrRef v, ExprId bound); /* i64: v if 0 <= v < bound, else 0 and a report */
IrRef ir_index(Kernel *k, ExprId index);          /* i64 */
/* op elementwise (unary, binary, compare, where, cast) with exactly its
 * kn_opinfo nsrc operands, the rest 0; dt its result: the first operand's
 * (where: the second's), bool for a compare, the target for a cast. */
IrRef ir_op(Kernel *k, Op op, kn_dtype dt, IrRef a, IrRef b, IrRef c);
IrRef ir_accval(Kernel *k, int acc);              /* the accumulator's dtype */
IrRef ir_rand(Kernel *k, IrRef key, IrRef ctr, ExprId offset); /* f32: key's stream at ctr + offset */
IrRef ir_loop(Kernel *k, IrBlock *b, ExprId extent, LoopKind kind, uint32_t width); /* its var is k->nvars - 1;
                                                     width >= 1 for vector and unroll, else taken as 1 */
IrRef ir_store(Kernel *k, IrBlock *b, int buf, ExprId index, IrRef value);
/* b[index + off] = value, or += value if add (off an i64 value, or 0) */
IrRef ir_store_at(Kernel *k, IrBlock *b, int buf, ExprId index, IrRef off, IrRef value, int add);
int ir_acc(Kernel *k, IrBlock *b, Op op, kn_dtype dt);  /* accumulator number (k->naccs - 1) or -1 */
IrRef ir_update(Kernel *k, IrBlock *b, int acc, IrRef value);

/* The value operands of value node x, which are x->a, x->b, x->c in that
 * order: how many (an op's nsrc, a load's offset, a check's value, rand's
 * key and counter). */
int ir_nsrc(const IrNode *x);

/* ---- text, checks ---- */
/* The grammar at the top, as snprintf: writes at most cap bytes including
 * the NUL, returns the length the whole text needs. A value shared by two
 * users prints twice (a DAG prints as a tree, so text grows with sharing).
 * Any kernel prints, broken ones with "?" where a node is not what its
 * place needs (an operand must be older than its user). */
size_t ir_print(const Kernel *k, char *buf, size_t cap);
/* Reads text into k, which must be fresh from ir_init: 0, or -1 with "line
 * N: reason" in why. Any bytes are safe input. Loop and accumulator numbers
 * are kept as written (nvars, naccs become one past the largest); after an
 * error k holds a partial kernel, to be ir_init'ed again. */
int ir_parse(Kernel *k, const char *text, char *why, size_t whycap);
/* 0, or an error naming the kernel, the statement and the reason:
 * - each statement and value node is valid, used once in the tree (no
 *   cycles), loops nest at most IR_MAX_NEST deep, values IR_MAX_DEPTH;
 * - every symbol of an index or extent is the var of an enclosing loop, and
 *   no loop rebinds an enclosing loop's var;
 * - a data-dependent offset is an i64 value, check() takes an integer,
 *   rand() an i64 key and counter;
 * - stores write out or tmp buffers, in the buffer's dtype; loads read any
 *   buffer in its dtype (an out buffer: what the kernel stored there
 *   before, which the verifier does not check);
 * - an accumulator is declared once, before its uses, in a block that
 *   encloses them, and updated with values of its dtype by its own op;
 * - each IR_OP follows its primitive's dtype rule (prim_shape's).
 * Symbols in buffer sizes are not checked; shape symbols (IR_SHAPE_SYM)
 * may stand anywhere a loop var may. */
int ir_verify(kn_ctx *ctx, const Kernel *k);

#endif
