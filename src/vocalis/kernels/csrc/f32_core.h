// vocalis: the arithmetic of the float32 linear (f32.cpp registers it as torch.ops.vocalis_f32;
// selftest.cpp runs it without PyTorch): plain pointers and sizes, one source for every
// instruction set (simd.h: AVX2 + FMA, NEON, portable C++), the same results bit for bit on
// each.
//
// Written for the talker's and code predictor's steps, where one row reads every weight once
// and the product is bound by memory reads. The weights are float32 (w [N, K] row-major, no
// copy; 4 output channels at a time, each read as its own stream), or bfloat16 when every
// weight is a bfloat16 value (the official checkpoints are bfloat16), packed by pack_bf16 in
// tiles of 4 channels read as one stream: each is widened exactly to its float32 as it is
// read (a bfloat16 is the top half of that float32), so the products and sums are the same,
// in half the bytes. A software prefetch runs ahead of every stream. Up to 3 rows per pass
// over a tile (12 accumulators of 8 lanes). y[m, n] = sum over k of x[m, k] w[n, k], summed in
// a fixed order (8 lanes by fused multiply-add over k, then the lanes in simd.h's hsum8
// order, then the last K % 8 terms by fused multiply-add) that depends on K alone: a row's
// result does not depend on the other rows of the call, on how rows are grouped, on the
// thread count, or on the instruction set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace f32_core {

using namespace vocalis_simd;

constexpr int64_t R = 4;            // output channels per tile
constexpr int64_t MR = 3;           // rows per pass over a tile
constexpr int64_t PF_BYTES = 1024;  // prefetched ahead per channel (a tile: 4 KB of its stream)

// The instruction set this core was compiled for (simd.h).
inline const char* isa() {
#if defined(VOCALIS_X86)
  return "avx2";
#elif defined(VOCALIS_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

// Tiles of N output channels.
inline int64_t tiles(int64_t N) { return (N + R - 1) / R; }

// The 4 channels of a tile as float32 rows of w [N, K]: 4 streams.
struct F32Rows {
  const float* w[R];
  f32x8 v(int c, int64_t k) const { return load8(w[c] + k); }
  float s(int c, int64_t k) const { return w[c][k]; }
  void prefetch(int64_t k) const {  // called once per 16 k
    for (int c = 0; c < R; ++c) vocalis_simd::prefetch(reinterpret_cast<const char*>(w[c] + k) + PF_BYTES);
  }
};

// The 4 channels of a tile packed by pack_bf16: blocks [K / 8][4][8] (64 bytes each: 8 weights
// of each channel), then the last K % 8 weights [4][K % 8]. One stream.
struct BF16Tile {
  const uint16_t* p;
  const uint16_t* tail;
  int64_t rem, k8;
  f32x8 v(int c, int64_t k) const { return widen8(p + (k / 8) * 32 + c * 8); }  // k % 8 == 0
  float s(int c, int64_t k) const { return widen(tail[c * rem + (k - k8)]); }    // k >= k8
  void prefetch(int64_t k) const {  // called once per 16 k: the two blocks
    const char* b = reinterpret_cast<const char*>(p + (k / 8) * 32) + 4 * PF_BYTES;
    vocalis_simd::prefetch(b);
    vocalis_simd::prefetch(b + 64);
  }
};

// out[r][c] = sum_k x_r[k] w_c[k] for ROWS rows and the 4 channels of w. The order of the sum
// (per channel: 8 lanes by fused multiply-add over k, the lanes, then the last K % 8 terms)
// is the same whatever the source of the weights and the instruction set.
template <int ROWS, typename Src>
inline void dot_tile(const Src& w, int64_t K, const float* const* x, float (*out)[R]) {
  f32x8 acc[ROWS][R];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = zero8();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    w.prefetch(k);
    for (int64_t h = 0; h < 16; h += 8) {
      f32x8 xv[ROWS];
      for (int r = 0; r < ROWS; ++r) xv[r] = load8(x[r] + k + h);
      for (int c = 0; c < R; ++c) {
        const f32x8 wv = w.v(c, k + h);
        for (int r = 0; r < ROWS; ++r) acc[r][c] = fma8(xv[r], wv, acc[r][c]);
      }
    }
  }
  for (; k + 8 <= K; k += 8) {
    for (int c = 0; c < R; ++c) {
      const f32x8 wv = w.v(c, k);
      for (int r = 0; r < ROWS; ++r) acc[r][c] = fma8(load8(x[r] + k), wv, acc[r][c]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) {
      float s = sum8(acc[r][c]);
      // std::fma: the same rounding for every source, whatever the compiler would contract
      for (int64_t t = k; t < K; ++t) s = std::fma(x[r][t], w.s(c, t), s);
      out[r][c] = s;
    }
}

// Tiles t0 .. t1 - 1 of Y [M, N] = X [M, K] W^T, the rows in passes of up to 3 over each tile
// of 4 channels; tile(t, n0, nr) gives the weights of tile t (channels n0 .. n0 + nr - 1).
template <typename Tile>
void rows_tiles(const float* X, float* Y, int64_t M, int64_t N, int64_t K, const Tile& tile,
                int64_t t0, int64_t t1) {
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
}

// Tiles t0 .. t1 - 1 (of tiles(N)) of Y [M, N] = X [M, K] W^T for W [N, K] float32.
inline void linear(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K,
                   int64_t t0, int64_t t1) {
  rows_tiles(X, Y, M, N, K, [&](int64_t, int64_t n0, int64_t nr) {
    F32Rows s;
    for (int64_t c = 0; c < R; ++c) s.w[c] = W + (n0 + std::min<int64_t>(c, nr - 1)) * K;
    return s;
  }, t0, t1);
}

// Sizes of pack_bf16's outputs for w [N, K], in bfloat16 values.
inline int64_t bf16_tiles_size(int64_t N, int64_t K) { return tiles(N) * (K / 8) * R * 8; }
inline int64_t bf16_tail_size(int64_t N, int64_t K) { return tiles(N) * R * (K % 8); }

// w [N, K] bfloat16 (as uint16 bits) -> tiles [ceil(N / 4), K / 8, 4, 8] and tail
// [ceil(N / 4), 4, K % 8]: the layout BF16Tile reads; a last partial tile repeats its last
// channel.
inline void pack_bf16(const uint16_t* src, int64_t N, int64_t K, uint16_t* dt, uint16_t* dr) {
  const int64_t T = tiles(N), K8 = K / 8, rem = K % 8;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < R; ++c) {
      const uint16_t* row = src + std::min(t * R + c, N - 1) * K;
      for (int64_t b = 0; b < K8; ++b) std::memcpy(dt + ((t * K8 + b) * R + c) * 8, row + b * 8, 16);
      if (rem) std::memcpy(dr + (t * R + c) * rem, row + K8 * 8, rem * 2);
    }
}

// Tiles t0 .. t1 - 1 of Y [M, N] = X [M, K] W^T for W packed by pack_bf16 (P: tiles, Q: tail):
// bit for bit linear() of W as float32.
inline void bf16_linear(const float* X, const uint16_t* P, const uint16_t* Q, float* Y, int64_t M,
                        int64_t N, int64_t K, int64_t t0, int64_t t1) {
  const int64_t K8 = K / 8, rem = K % 8;
  rows_tiles(X, Y, M, N, K, [&](int64_t t, int64_t, int64_t) {
    return BF16Tile{P + t * K8 * R * 8, Q + t * R * rem, rem, K8 * 8};
  }, t0, t1);
}

// ---------------------------------------------------------------- ELU (alpha 1)
//
// y = x for x > 0 (and for NaN, which stays NaN), else expm1(x): Pocket TTS's SEANet decoder
// (torch.ops.vocalis_f32.elu, the speed choice codec_elu=vocalis). expm1(t) for t <= 0, clamped
// at -87 (expm1 is -1 to float32 below about -17): t = n ln2 + r with n = round(t / ln2)
// (nearest, ties to even) and |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite 1980), then
// expm1(r) = r + r^2 (1/2! + r (1/3! + ... + r / 8!)) in Horner form, and expm1(t) =
// 2^n expm1(r) + (2^n - 1), one fused multiply-add. Near 0 (n = 0) the result is expm1(r)
// itself, no cancellation; elsewhere the absolute error is about one float32 rounding of the
// result (|expm1(t)| < 1). Every instruction set runs these operations in this order, so the
// results are the same bit for bit.
namespace elu_detail {
constexpr float LOG2E = 1.44269504088896341f;
constexpr float LN2_HI = 0.693145751953125f;        // ln 2 to 16 bits: n * LN2_HI is exact
constexpr float LN2_LO = 1.42860682030941723212e-6f;
constexpr float LOW = -87.0f;                         // 2^n stays a normal float32
constexpr float C[7] = {1.f / 2, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040, 1.f / 40320};

inline float one(float x) {
  if (!(x <= 0.f)) return x;  // x > 0 or NaN
  const float t = std::max(x, LOW);
  const float n = std::nearbyint(t * LOG2E);
  float r = std::fma(n, -LN2_HI, t);
  r = std::fma(n, -LN2_LO, r);
  float p = C[6];
  for (int i = 5; i >= 0; --i) p = std::fma(p, r, C[i]);
  const float pm1 = std::fma(r * r, p, r);
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return std::fma(scale, pm1, scale - 1.f);
}
}  // namespace elu_detail

// y[i] = elu(x[i]) for i in [0, n).
inline void elu(const float* x, float* y, int64_t n) {
  using namespace elu_detail;
  int64_t i = 0;
#if defined(VOCALIS_X86)
  const __m256 zero = _mm256_setzero_ps(), low = _mm256_set1_ps(LOW);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 t = _mm256_max_ps(v, low);  // NaN lanes: taken from v below
    const __m256 nn = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(LOG2E)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LN2_HI), t);
    r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LN2_LO), r);
    __m256 p = _mm256_set1_ps(C[6]);
    for (int c = 5; c >= 0; --c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C[c]));
    const __m256 pm1 = _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r);
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23);
    const __m256 scale = _mm256_castsi256_ps(e);
    const __m256 em1 = _mm256_fmadd_ps(scale, pm1, _mm256_sub_ps(scale, _mm256_set1_ps(1.f)));
    const __m256 pos = _mm256_cmp_ps(v, zero, _CMP_NLE_UQ);  // x > 0 or NaN
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(em1, v, pos));
  }
#elif defined(VOCALIS_NEON)
  const float32x4_t zero = vdupq_n_f32(0.f), low = vdupq_n_f32(LOW);
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    // lanes above 0 or NaN: t = 0, their result is x below
    const float32x4_t t = vbslq_f32(vcleq_f32(v, zero), vmaxq_f32(v, low), zero);
    const float32x4_t nn = vrndnq_f32(vmulq_f32(t, vdupq_n_f32(LOG2E)));
    float32x4_t r = vfmaq_f32(t, nn, vdupq_n_f32(-LN2_HI));
    r = vfmaq_f32(r, nn, vdupq_n_f32(-LN2_LO));
    float32x4_t p = vdupq_n_f32(C[6]);
    for (int c = 5; c >= 0; --c) p = vfmaq_f32(vdupq_n_f32(C[c]), p, r);
    const float32x4_t pm1 = vfmaq_f32(r, vmulq_f32(r, r), p);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(nn), vdupq_n_s32(127)), 23);
    const float32x4_t scale = vreinterpretq_f32_s32(e);
    const float32x4_t em1 = vfmaq_f32(vsubq_f32(scale, vdupq_n_f32(1.f)), scale, pm1);
    vst1q_f32(y + i, vbslq_f32(vcleq_f32(v, zero), em1, v));  // x <= 0: em1; else (NaN too) x
  }
#endif
  for (; i < n; ++i) y[i] = elu_detail::one(x[i]);
}

}  // namespace f32_core
