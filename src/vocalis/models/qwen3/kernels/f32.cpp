// vocalis: float32 linear for x86 CPUs with AVX2 (Qwen3-TTS float32 model_linears="vocalis"),
// written for the talker's and code predictor's steps, where one row reads every weight once
// and the product is bound by memory reads.
//
// The weights are float32 as PyTorch holds them (w [N, K] row-major, no copy), or bfloat16
// [N, K] when every weight is a bfloat16 value (the official checkpoints are bfloat16): each is
// widened exactly to its float32 as it is read (a bfloat16 is the top half of that float32), so
// the products and sums are the same, in half the bytes. 4 output channels at a time, each read
// as its own sequential stream with a software prefetch ahead, against up to 3 rows per pass
// (12 accumulators of 8 lanes). y[m, n] = sum over k of x[m, k] w[n, k], summed in
// a fixed order (8 lanes by fused multiply-add over k, then the lanes) that depends on K alone:
// a row's result does not depend on the other rows of the call, on how rows are grouped, or on
// the thread count. The point of the kernel is lend.h: while the engine's codec thread waits,
// its core takes blocks of the output channels (one core reads about 17 GB/s on the development
// machine, two about 27).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "lend.h"

namespace {

constexpr int64_t R = 4;     // output channels per tile
constexpr int64_t MR = 3;    // rows per pass over a tile
constexpr int64_t PF_BYTES = 1024;  // of each channel's weights prefetched ahead

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 weights as float32: read as float32, or as bfloat16 widened exactly (a bfloat16 is the top
// half of the float32 of the same value).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(float v) { return v; }
inline float widen(uint16_t v) {
  const uint32_t b = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// out[r][c] = sum_k x_r[k] w_c[k] for ROWS rows and the 4 channels w_c.
template <int ROWS, typename W>
inline void dot_tile(const W* const* w, int64_t K, const float* const* x, float (*out)[R]) {
  constexpr int64_t PF = PF_BYTES / sizeof(W);
  __m256 acc[ROWS][R];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    for (int c = 0; c < R; ++c) _mm_prefetch(reinterpret_cast<const char*>(w[c] + k + PF), _MM_HINT_T0);
    for (int64_t h = 0; h < 16; h += 8) {
      __m256 xv[ROWS];
      for (int r = 0; r < ROWS; ++r) xv[r] = _mm256_loadu_ps(x[r] + k + h);
      for (int c = 0; c < R; ++c) {
        const __m256 wv = load8(w[c] + k + h);
        for (int r = 0; r < ROWS; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
  }
  for (; k + 8 <= K; k += 8) {
    for (int c = 0; c < R; ++c) {
      const __m256 wv = load8(w[c] + k);
      for (int r = 0; r < ROWS; ++r) acc[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + k), wv, acc[r][c]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) {
      float s = hsum8(acc[r][c]);
      for (int64_t t = k; t < K; ++t) s += x[r][t] * widen(w[c][t]);
      out[r][c] = s;
    }
}

// Y [M, N] = X [M, K] W [N, K]^T, the rows in passes of up to 3 over each tile of 4 channels.
template <typename W>
void linear_rows(const float* X, const W* Wt, float* Y, int64_t M, int64_t N, int64_t K) {
  const int64_t T = (N + R - 1) / R;
  vocalis_lend::parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    float o[MR][R];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * R, nr = std::min<int64_t>(R, N - n0);
      const W* wc[R];
      for (int64_t c = 0; c < R; ++c) wc[c] = Wt + (n0 + std::min<int64_t>(c, nr - 1)) * K;
      for (int64_t m = 0; m < M; m += MR) {
        const int rows = (int)std::min<int64_t>(MR, M - m);
        const float* xr[MR];
        for (int r = 0; r < MR; ++r) xr[r] = X + (m + std::min(r, rows - 1)) * K;
        switch (rows) {
          case 3: dot_tile<3>(wc, K, xr, o); break;
          case 2: dot_tile<2>(wc, K, xr, o); break;
          default: dot_tile<1>(wc, K, xr, o);
        }
        for (int r = 0; r < rows; ++r)
          for (int64_t c = 0; c < nr; ++c) Y[(m + r) * N + n0 + c] = o[r][c];
      }
    }
  });
}

}  // namespace

// x [..., K] float32, w [N, K] float32 or bfloat16 (contiguous) -> y [..., N] float32 (no
// bias). A bfloat16 weight is widened exactly, so it gives bit for bit the result of the same
// weight held as float32.
torch::Tensor f32_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "f32_linear: x must be float32");
  TORCH_CHECK(w.scalar_type() == torch::kFloat32 || w.scalar_type() == torch::kBFloat16,
              "f32_linear: w must be float32 or bfloat16");
  TORCH_CHECK(w.dim() == 2 && w.is_contiguous(), "f32_linear: w must be contiguous [N, K]");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K, "f32_linear: x [..., K] does not match w [N, K]");
  const int64_t M = K > 0 ? xs.numel() / K : 0;
  std::vector<int64_t> shape(xs.sizes().begin(), xs.sizes().end());
  shape.back() = N;
  auto y = torch::empty(shape, torch::kFloat32);
  if (M == 0 || N == 0) return y;
  if (w.scalar_type() == torch::kFloat32)
    linear_rows(xs.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
  else
    linear_rows(xs.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()),
                y.data_ptr<float>(), M, N, K);
  return y;
}

TORCH_LIBRARY(vocalis_f32, m) {
  m.def("lend(bool on) -> ()", &vocalis_lend::lend);  // the codec's idle core (lend.h)
  m.def("lent_blocks() -> int", &vocalis_lend::lent_blocks);
  m.def("linear(Tensor x, Tensor w) -> Tensor");
  m.impl("linear", torch::kCPU, &f32_linear);
}
