// The CUDA test kernels, built as cubin (one per architecture family), fatbin and PTX.

// c = a + b over n floats.
extern "C" __global__ void vadd(float* c, const float* a, const float* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Runs for `ns` nanoseconds of the GPU's global timer: a kernel of known duration, for the
// event timer's test (launch it with one thread).
extern "C" __global__ void spin_ns(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<unsigned long long>(ns));
}

// Writes through a pointer no allocation covers: CUDA_ERROR_ILLEGAL_ADDRESS, which poisons the
// context.
extern "C" __global__ void fault(float* p) {
  volatile float* bad = reinterpret_cast<volatile float*>(reinterpret_cast<unsigned long long>(p) ^
                                                          0x7f0000000000ull);
  *bad = 1.0f;
}
