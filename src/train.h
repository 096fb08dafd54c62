/*
 * train.h — the commands that run whole models: `kiln train` (train.c),
 * `kiln explain` and `kiln bench train|infer|dispatch` (explain.c).
 */
#ifndef KN_TRAIN_H
#define KN_TRAIN_H

int cli_train(int argc, char **argv);   /* 0, 1 on failure, 2 on bad usage */
int cli_explain(int argc, char **argv);
int bench_models(const char *suite, int json, int quick); /* train, infer, dispatch; -1: no such suite */

#endif
