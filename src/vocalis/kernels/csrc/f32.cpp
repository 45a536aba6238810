// vocalis: float32 linear for x86 CPUs with AVX2 (Qwen3-TTS float32 model_linears="vocalis"),
// written for the talker's and code predictor's steps, where one row reads every weight once
// and the product is bound by memory reads.
//
// The weights are float32 as PyTorch holds them (w [N, K] row-major, no copy; 4 output channels
// at a time, each read as its own stream), or bfloat16 when every weight is a bfloat16 value
// (the official checkpoints are bfloat16), packed by pack_bf16 in tiles of 4 channels read as
// one stream: each is widened exactly to its float32 as it is read (a bfloat16 is the top half
// of that float32), so the products and sums are the same, in half the bytes. A software
// prefetch runs ahead of every stream. Up to 3 rows per pass over a tile (12 accumulators of 8
// lanes). y[m, n] = sum over k of x[m, k] w[n, k], summed in a fixed order (8 lanes by fused
// multiply-add over k, then the lanes, then the last K % 8 terms) that depends on K alone:
// a row's result does not depend on the other rows of the call, on how rows are grouped, or on
// the thread count. The point of the kernel is lend.h: while the engine's codec thread waits,
// its core takes blocks of the output channels (two cores read memory faster than one; figures
// in docs/speed-choices.md, "Engine threads").
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lend.h"

namespace {

constexpr int64_t R = 4;     // output channels per tile
constexpr int64_t MR = 3;    // rows per pass over a tile
constexpr int64_t PF_BYTES = 1024;  // prefetched ahead per channel (a tile: 4 KB of its stream)

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A bfloat16 is the top half of the float32 of the same value: widening is exact.
inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(uint16_t v) {
  const uint32_t b = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The 4 channels of a tile as float32 rows of w [N, K]: 4 streams.
struct F32Rows {
  const float* w[R];
  __m256 v(int c, int64_t k) const { return _mm256_loadu_ps(w[c] + k); }
  float s(int c, int64_t k) const { return w[c][k]; }
  void prefetch(int64_t k) const {  // called once per 16 k
    for (int c = 0; c < R; ++c)
      _mm_prefetch(reinterpret_cast<const char*>(w[c] + k) + PF_BYTES, _MM_HINT_T0);
  }
};

// The 4 channels of a tile packed by pack_bf16: blocks [K / 8][4][8] (64 bytes each: 8 weights
// of each channel), then the last K % 8 weights [4][K % 8]. One stream.
struct BF16Tile {
  const uint16_t* p;
  const uint16_t* tail;
  int64_t rem, k8;
  __m256 v(int c, int64_t k) const { return widen8(p + (k / 8) * 32 + c * 8); }  // k % 8 == 0
  float s(int c, int64_t k) const { return widen(tail[c * rem + (k - k8)]); }     // k >= k8
  void prefetch(int64_t k) const {  // called once per 16 k: the two blocks
    const char* b = reinterpret_cast<const char*>(p + (k / 8) * 32) + 4 * PF_BYTES;
    _mm_prefetch(b, _MM_HINT_T0);
    _mm_prefetch(b + 64, _MM_HINT_T0);
  }
};

// out[r][c] = sum_k x_r[k] w_c[k] for ROWS rows and the 4 channels of w. The order of the sum
// (per channel: 8 lanes by fused multiply-add over k, the lanes, then the last K % 8 terms)
// is the same whatever the source of the weights.
template <int ROWS, typename Src>
inline void dot_tile(const Src& w, int64_t K, const float* const* x, float (*out)[R]) {
  __m256 acc[ROWS][R];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    w.prefetch(k);
    for (int64_t h = 0; h < 16; h += 8) {
      __m256 xv[ROWS];
      for (int r = 0; r < ROWS; ++r) xv[r] = _mm256_loadu_ps(x[r] + k + h);
      for (int c = 0; c < R; ++c) {
        const __m256 wv = w.v(c, k + h);
        for (int r = 0; r < ROWS; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
  }
  for (; k + 8 <= K; k += 8) {
    for (int c = 0; c < R; ++c) {
      const __m256 wv = w.v(c, k);
      for (int r = 0; r < ROWS; ++r) acc[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + k), wv, acc[r][c]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) {
      float s = hsum8(acc[r][c]);
      // std::fma: the same rounding for every source, whatever the compiler would contract
      for (int64_t t = k; t < K; ++t) s = std::fma(x[r][t], w.s(c, t), s);
      out[r][c] = s;
    }
}

// Y [M, N] = X [M, K] W^T, the rows in passes of up to 3 over each tile of 4 channels;
// tile(t, n0, nr) gives the weights of tile t (channels n0 .. n0 + nr - 1).
template <typename Tile>
void linear_rows(const float* X, float* Y, int64_t M, int64_t N, int64_t K, Tile tile) {
  const int64_t T = (N + R - 1) / R;
  vocalis_lend::parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    float o[MR][R];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * R, nr = std::min<int64_t>(R, N - n0);
      const auto w = tile(t, n0, nr);
      for (int64_t m = 0; m < M; m += MR) {
        const int rows = (int)std::min<int64_t>(MR, M - m);
        const float* xr[MR];
        for (int r = 0; r < MR; ++r) xr[r] = X + (m + std::min(r, rows - 1)) * K;
        switch (rows) {
          case 3: dot_tile<3>(w, K, xr, o); break;
          case 2: dot_tile<2>(w, K, xr, o); break;
          default: dot_tile<1>(w, K, xr, o);
        }
        for (int r = 0; r < rows; ++r)
          for (int64_t c = 0; c < nr; ++c) Y[(m + r) * N + n0 + c] = o[r][c];
      }
    }
  });
}

// y [..., N] float32 for x [..., K] float32, allocated; M = rows.
torch::Tensor output(const torch::Tensor& xs, int64_t N) {
  std::vector<int64_t> shape(xs.sizes().begin(), xs.sizes().end());
  shape.back() = N;
  return torch::empty(shape, torch::kFloat32);
}

}  // namespace

// x [..., K] float32, w [N, K] float32 (contiguous) -> y [..., N] float32 (no bias).
torch::Tensor f32_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "f32_linear: x and w must be float32");
  TORCH_CHECK(w.dim() == 2 && w.is_contiguous(), "f32_linear: w must be contiguous [N, K]");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K, "f32_linear: x [..., K] does not match w [N, K]");
  const int64_t M = K > 0 ? xs.numel() / K : 0;
  auto y = output(xs, N);
  if (M == 0 || N == 0) return y;
  const float* W = w.data_ptr<float>();
  linear_rows(xs.data_ptr<float>(), y.data_ptr<float>(), M, N, K,
              [&](int64_t, int64_t n0, int64_t nr) {
    F32Rows s;
    for (int64_t c = 0; c < R; ++c) s.w[c] = W + (n0 + std::min<int64_t>(c, nr - 1)) * K;
    return s;
  });
  return y;
}

// w [N, K] bfloat16 -> (tiles [ceil(N / 4), K / 8, 4, 8], tail [ceil(N / 4), 4, K % 8]), both
// bfloat16: the layout BF16Tile reads; a last partial tile repeats its last channel.
std::tuple<torch::Tensor, torch::Tensor> pack_bf16(torch::Tensor w) {
  TORCH_CHECK(w.scalar_type() == torch::kBFloat16 && w.dim() == 2,
              "pack_bf16: w must be bfloat16 [N, K]");
  auto wc = w.contiguous();
  const int64_t N = wc.size(0), K = wc.size(1), T = (N + R - 1) / R, K8 = K / 8, rem = K % 8;
  auto tiles = torch::empty({T, K8, R, 8}, torch::kBFloat16);
  auto tail = torch::empty({T, R, rem}, torch::kBFloat16);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(wc.data_ptr<at::BFloat16>());
  uint16_t* dt = reinterpret_cast<uint16_t*>(tiles.data_ptr<at::BFloat16>());
  uint16_t* dr = reinterpret_cast<uint16_t*>(tail.data_ptr<at::BFloat16>());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < R; ++c) {
      const uint16_t* row = src + std::min(t * R + c, N - 1) * K;
      for (int64_t b = 0; b < K8; ++b) std::memcpy(dt + ((t * K8 + b) * R + c) * 8, row + b * 8, 16);
      std::memcpy(dr + (t * R + c) * rem, row + K8 * 8, rem * 2);
    }
  return {tiles, tail};
}

// x [..., K] float32, tiles and tail of pack_bf16 for w [N, K] -> y [..., N] float32 (no bias):
// bit for bit f32_linear(x, w as float32).
torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor tiles, torch::Tensor tail, int64_t N) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "bf16_linear: x must be float32");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1), T = (N + R - 1) / R, K8 = K / 8, rem = K % 8;
  TORCH_CHECK(tiles.scalar_type() == torch::kBFloat16 && tiles.is_contiguous() &&
                  tiles.sizes() == torch::IntArrayRef({T, K8, R, 8}),
              "bf16_linear: tiles do not match x [..., K] and N (pack_bf16)");
  TORCH_CHECK(tail.scalar_type() == torch::kBFloat16 && tail.is_contiguous() &&
                  tail.sizes() == torch::IntArrayRef({T, R, rem}),
              "bf16_linear: tail does not match x [..., K] and N (pack_bf16)");
  const int64_t M = K > 0 ? xs.numel() / K : 0;
  auto y = output(xs, N);
  if (M == 0 || N == 0) return y;
  const uint16_t* P = reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>());
  const uint16_t* Q = reinterpret_cast<const uint16_t*>(tail.data_ptr<at::BFloat16>());
  linear_rows(xs.data_ptr<float>(), y.data_ptr<float>(), M, N, K,
              [&](int64_t t, int64_t, int64_t) {
    return BF16Tile{P + t * K8 * R * 8, Q + t * R * rem, rem, K8 * 8};
  });
  return y;
}

TORCH_LIBRARY(vocalis_f32, m) {
  m.def("lend(bool on) -> ()", &vocalis_lend::lend);  // the codec's idle core (lend.h)
  m.def("lent_blocks() -> int", &vocalis_lend::lent_blocks);
  m.def("linear(Tensor x, Tensor w) -> Tensor");
  m.impl("linear", torch::kCPU, &f32_linear);
  m.def("pack_bf16(Tensor w) -> (Tensor, Tensor)");
  m.impl("pack_bf16", torch::kCPU, &pack_bf16);
  m.def("bf16_linear(Tensor x, Tensor tiles, Tensor tail, int n) -> Tensor");
  m.impl("bf16_linear", torch::kCPU, &bf16_linear);
}
