/*
 * target.h — what a code generator is: one struct of function pointers that
 * turns loop-IR kernels into something a machine runs. src/compile.c drives
 * it; nothing else in the compiler knows which target is in use.
 *
 * The C target (targets/c) fills it twice, for its two compile-and-load
 * paths: "tcc" renders the scalar dialect and compiles it in the process
 * with libtcc (milliseconds); "c" renders the same text for the system
 * compiler, built into a shared object through port_jit's content-hash
 * cache. Both run a kernel as a call fn(bufs).
 *
 * How the next targets fill the same struct:
 * - targets/wasm: render emits WebAssembly module bytes directly (one
 *   exported function per kernel, SIMD128 for vector loops, buffers as
 *   offsets into the one linear memory); load instantiates the module
 *   through the port (the browser's WebAssembly.instantiate, or node's);
 *   sym returns an export; run calls it with the buffer offsets.
 * - targets/cuda: render emits the CUDA C dialect of the C renderer
 *   (extern "C" __global__ kernels, gpu_block/gpu_thread loops mapped to
 *   blockIdx/threadIdx); load compiles it with NVRTC to a cubin and loads
 *   it with cuModuleLoadData (both opened with dlopen); sym is
 *   cuModuleGetFunction; run is cuLaunchKernel with the grid the kernel's
 *   gpu loops give, buffers being device pointers.
 * So a target is at most these eight entries; each new one must earn its place.
 */
#ifndef KN_TARGET_H
#define KN_TARGET_H

#include "ir.h"

typedef struct Target {
    const char *name;
    int (*available)(void);                                            /* usable on this machine? */
    size_t (*render)(const Kernel *const *ks, int nk, char *buf, size_t cap); /* source, snprintf-style */
    void *(*load)(const char *src, char *why);                         /* compile and load; why >= 256 */
    void *(*sym)(void *module, const char *name);                      /* a kernel's entry */
    void (*unload)(void *module);
    void (*run)(void *fn, void **bufs, const Kernel *k);               /* run one kernel */
} Target;

extern const Target kn_target_c;   /* system cc, cached shared objects */
extern const Target kn_target_tcc; /* libtcc, in memory */

#endif
