/*
 * kprof module ABI — what a shared-library module exports so that kprofd can call it.
 *
 * A module is an ELF shared object for the daemon's host. Each function kprofd can run is
 *
 *     extern "C" int32_t NAME(DLTensor* args, int32_t num_args);
 *
 * `args` points to `num_args` DLPack tensors, one per argument spec of the request, in order.
 * Scalars arrive as 0-d tensors (ndim == 0) holding one element. Tensors are compact and
 * row-major (strides == NULL, byte_offset == 0) and their data is aligned to 256 bytes unless
 * the request asks otherwise (tensor_offset, randomize_layout and tensor_alignment place it at
 * the offset they name, as a client measuring alignment wants); on a CUDA device, `data` is a
 * device pointer. Return 0 for success; any other value is reported to
 * the client as the function's error code (ABORTED: "function 'f' returned 3").
 *
 * Data types follow DLPack: int/uint/float of 8 to 64 bits, bfloat16 (kDLBfloat, 16 bits), and
 * bool as KPROF_DL_BOOL (code 6, 8 bits — the code later DLPack versions name kDLBool).
 *
 * The function is called many times in a row and must not keep state between calls that changes
 * its work. It runs in a worker process: crashing or hanging costs only that worker.
 *
 * Example (C):
 *
 *     #include <kprof/module_abi.h>
 *
 *     KPROF_EXPORT int32_t vadd(DLTensor* args, int32_t num_args) {
 *       if (num_args != 3) return 1;
 *       const float* a = (const float*)args[0].data;
 *       const float* b = (const float*)args[1].data;
 *       float* c = (float*)args[2].data;
 *       int64_t n = kprof_num_elements(&args[2]);
 *       for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
 *       return 0;
 *     }
 */
#ifndef KPROF_MODULE_ABI_H_
#define KPROF_MODULE_ABI_H_

#include <dlpack/dlpack.h>
#include <stdint.h>

#define KPROF_MODULE_ABI_VERSION 1

#ifdef __cplusplus
#define KPROF_EXTERN_C extern "C"
#else
#define KPROF_EXTERN_C
#endif

/* Marks a function as exported with the kprof ABI, whatever the module's default visibility. */
#define KPROF_EXPORT KPROF_EXTERN_C __attribute__((visibility("default")))

/* DLPack's type code for bool (8 bits per element), absent from DLPack 0.6's enum. */
#define KPROF_DL_BOOL 6

#ifdef __cplusplus
extern "C" {
#endif

/* The type of every exported function. */
typedef int32_t (*KprofFunction)(DLTensor* args, int32_t num_args);

/* The number of elements of a tensor: the product of its shape, 1 for a scalar. */
static inline int64_t kprof_num_elements(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* KPROF_MODULE_ABI_H_ */
