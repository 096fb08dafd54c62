/*
 * composite.c — the names of the composite ops (composite.h's table), for
 * the library: a primitive's index error names the composite that made it.
 */
#include <string.h>

#include "composite.h"

static const char *const names[COMP_COUNT] = {
#define NAME_(name, example, grad) #name,
    KN_COMPOSITES(NAME_)
#undef NAME_
};

/* Params.origin holds 1 + a composite's index in a byte */
typedef char composite_assert_origin_fits[(COMP_COUNT < 255) ? 1 : -1];

const char *composite_name(int i) { return i >= 0 && i < COMP_COUNT ? names[i] : NULL; }

int composite_find(const char *public_op)
{
    if (!public_op || strncmp(public_op, "kn_", 3) != 0) return 0;
    for (int i = 0; i < COMP_COUNT; i++)
        if (!strcmp(public_op + 3, names[i])) return i + 1;
    return 0;
}
