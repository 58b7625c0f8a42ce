// c = a + b over n floats: the CUDA test kernel, built as cubin, fatbin and PTX.
extern "C" __global__ void vadd(float* c, const float* a, const float* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
