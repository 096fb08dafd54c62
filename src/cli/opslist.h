/*
 * opslist.h — `kiln ops` (opslist.c): the primitive table, then every composite
 * with what it decomposes into.
 */
#ifndef KN_OPSLIST_H
#define KN_OPSLIST_H

/* Traces every composite; prints the listing when print is set. Returns how many composites
 * failed to trace (-1: no context), and the counts through nprim/ncomp. */
int opslist_run(int print, int *nprim, int *ncomp);
int kn_cli_ops(void); /* kiln ops: the listing; 0 if every composite traced */

#endif
