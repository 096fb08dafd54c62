/*
 * partition.h — running a program of graph nodes, and splitting a joint
 * forward+backward graph into a forward and a backward program (the
 * AOTAutograd stage). See partition.c for the algorithm.
 *
 * A program is a list of node ids in topological (id) order. Values travel
 * in an array of g->n tensor slots indexed by node id.
 */
#ifndef KN_PARTITION_H
#define KN_PARTITION_H

#include "core.h"

/* Computes every node of prog, in order, eagerly with prim() from
 * vals[src] and the node's parameters, storing the result in vals[id].
 * The caller fills the slots of the program's inputs first: its INPUT nodes
 * and any node it reads but does not compute (the saved values of a
 * backward program). ctx->trace must be NULL; nothing is recorded for
 * autodiff. New tensors belong to the caller's current scope.
 * Errors (status returned, message set): an id out of range, an INPUT
 * without a value, a source not computed yet, a value whose dtype or shape
 * differs from its node, a symbolic shape, or any error of the op itself. */
kn_status graph_run(kn_ctx *ctx, const Graph *g, const uint32_t *prog, int nprog, kn_tensor **vals);

/* Fills every empty INPUT slot of vals with the tensor that was traced for
 * it (g->input_vals). The tensors are not owned by the graph: the caller
 * keeps them alive. */
void graph_run_bind(const Graph *g, kn_tensor **vals);

typedef struct {
    uint32_t *fwd; int nfwd;     /* forward program: nodes in topological (id) order */
    uint32_t *bwd; int nbwd;     /* backward program: nodes it computes, incl. recomputed forward nodes */
    uint32_t *saved; int nsaved; /* values the forward hands to the backward (besides graph inputs) */
    size_t saved_bytes;          /* bytes of saved values with recomputation */
    size_t saved_bytes_all;      /* bytes if every forward value the backward reads were saved (no recompute) */
    int level;                   /* recompute level used: 0 pointwise and movement, 1 + reductions, 2 + indexing */
} Partition;

/* Splits the joint graph g. fwd_out: the forward's outputs (the loss, ...);
 * bwd_out: the backward's outputs (the gradients). The forward program
 * computes the ancestors of fwd_out; the backward program computes the
 * rest of the ancestors of bwd_out, recomputing cheap forward values from
 * the saved ones. budget > 0: if the saved bytes exceed it, more op classes
 * become recomputable (reductions, then indexing) until they fit or none is
 * left; the caller compares saved_bytes with budget. Arrays come from a.
 * Returns 0, or a status with the error set (bad ids, out of memory). */
int partition_joint(kn_ctx *ctx, const Graph *g, const uint32_t *fwd_out, int nfwd_out, const uint32_t *bwd_out,
                    int nbwd_out, size_t budget, Arena *a, Partition *out);

#endif
