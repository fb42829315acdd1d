// The baselines scripts/gpu-check.sh prints beside xfmr's kernels, measured
// in the same run on the same GPU: device-to-device copy bandwidth (bytes
// read + written per second) and cuBLAS single-precision GEMM, in full f32
// and with TF32 tensor cores (what xfmr's 3xTF32 products compete with).
//
//   nvcc -O2 -o gpu-bench scripts/gpu-bench.cu -lcublas
//   ./gpu-bench            one line per measurement: "name value unit"
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::fprintf(stderr, "gpu-bench: %s: %s\n", #x, cudaGetErrorString(e));      \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#define CHECK_BLAS(x)                                                              \
  do {                                                                             \
    cublasStatus_t s = (x);                                                        \
    if (s != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "gpu-bench: %s: status %d\n", #x, static_cast<int>(s)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

template <typename F> static float timeMs(F f, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  f(); // warm-up
  CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i)
    f();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms / reps;
}

int main() {
  // Copy: 2 GiB each way, well past the 60 MB L2.
  size_t bytes = size_t(2) << 30;
  void *src, *dst;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMemset(src, 1, bytes));
  float copyMs = timeMs([&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 10);
  std::printf("copy_bytes_per_s %.4g B/s\n", 2.0 * bytes / (copyMs * 1e-3));
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));

  const int n = 4096;
  float *a, *b, *c;
  CHECK(cudaMalloc(&a, sizeof(float) * n * n));
  CHECK(cudaMalloc(&b, sizeof(float) * n * n));
  CHECK(cudaMalloc(&c, sizeof(float) * n * n));
  CHECK(cudaMemset(a, 0, sizeof(float) * n * n));
  CHECK(cudaMemset(b, 0, sizeof(float) * n * n));
  cublasHandle_t h;
  CHECK_BLAS(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  double flop = 2.0 * n * n * double(n);
  for (auto [name, mode] : {std::pair{"cublas_sgemm_f32", CUBLAS_DEFAULT_MATH},
                            std::pair{"cublas_sgemm_tf32", CUBLAS_TF32_TENSOR_OP_MATH}}) {
    CHECK_BLAS(cublasSetMathMode(h, mode));
    float ms = timeMs([&] {
      CHECK_BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    }, 10);
    std::printf("%s %.4g TFLOP/s\n", name, flop / (ms * 1e-3) / 1e12);
  }
  CHECK_BLAS(cublasDestroy(h));
  return 0;
}
