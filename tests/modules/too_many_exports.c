/* 4097 exported functions, one past what an upload may export. */
#include <kprof/module_abi.h>

#define F(p, q, r)                                              \
  KPROF_EXPORT int32_t f_##p##q##r(DLTensor* args, int32_t n) { \
    (void)args;                                                 \
    return n;                                                   \
  }
#define C16(p, q)                                                                          \
  F(p, q, 0) F(p, q, 1) F(p, q, 2) F(p, q, 3) F(p, q, 4) F(p, q, 5) F(p, q, 6) F(p, q, 7) \
  F(p, q, 8) F(p, q, 9) F(p, q, a) F(p, q, b) F(p, q, c) F(p, q, d) F(p, q, e) F(p, q, f)
#define B16(p)                                                                             \
  C16(p, 0) C16(p, 1) C16(p, 2) C16(p, 3) C16(p, 4) C16(p, 5) C16(p, 6) C16(p, 7) C16(p, 8) \
  C16(p, 9) C16(p, a) C16(p, b) C16(p, c) C16(p, d) C16(p, e) C16(p, f)

B16(0) B16(1) B16(2) B16(3) B16(4) B16(5) B16(6) B16(7)
B16(8) B16(9) B16(a) B16(b) B16(c) B16(d) B16(e) B16(f)

KPROF_EXPORT int32_t one_too_many(DLTensor* args, int32_t n) {
  (void)args;
  return n;
}
