/*
 * train.h — the commands that run whole models: `kiln train` (train.c),
 * `kiln explain` and `kiln bench train|infer|dispatch` (explain.c).
 */
#ifndef KN_TRAIN_H
#define KN_TRAIN_H

int cli_train(int argc, char **argv);   /* 0, 1 on failure, 2 on bad usage */
int cli_explain(int argc, char **argv);
/* train, infer, dispatch; model (mlp, gpt, cnn) and backend (c, tcc) pick one when not NULL (eager always
 * runs: it is the check); -1: no such suite, 2: bad model or backend */
int bench_models(const char *suite, int json, int quick, const char *model, const char *backend);

#endif
