// vocalis: the arithmetic of the int8 linear (q8.cpp registers it as torch.ops.vocalis_q8;
// selftest.cpp runs it without PyTorch): plain pointers and sizes, one source for every
// instruction set (simd.h: AVX2, AVX-512 VNNI, NEON, NEON with the dot-product instructions,
// portable C++), the same results bit for bit on each.
//
// Weights: int8 per output channel, s_n = max_k |w[n, k]| / 127, q = clamp(round(w / s_n), -127, 127),
// stored in tiles of 4 output channels interleaved by blocks of 32 inputs ([N/4][K/32][4][32]
// bytes), so that a one-row call reads the weights as one sequential stream (with a software
// prefetch ahead): at one row the product is bound by memory reads, and this layout reads them
// faster than fbgemm's packed int8 (figures: docs/performance.md, the Qwen3-TTS notes).
// Activations: each row quantized per call, s_m = max_k |x[m, k]| / 63, a = round(x / s_m) in
// [-63, 63] (the precision of fbgemm's dynamic int8 with reduce_range), stored as a + 64 in
// [1, 127] so that x86's vpmaddubsw (unsigned by signed bytes, pair sums within int16:
// 2 * 127 * 127) needs no sign fix-up (a + 64 is a signed byte too, for NEON's signed
// products); the offset is removed through the weights' per-channel sums:
// sum_k a_k q_nk = sum_k (a_k + 64) q_nk - 64 sum_k q_nk, exact in int32, and
// y[m, n] = (s_m * s_n) * acc[m, n] in float32. A row's result therefore does not depend on the
// other rows of the call, on how rows are grouped, on the thread count, or on the instruction
// set (the integer sums are exact on each; rounding to nearest, ties to even, on each).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd.h"

namespace q8_core {

constexpr int64_t R = 4;       // output channels per tile
constexpr int64_t KB = 32;     // inputs per block
constexpr int64_t MR = 4;      // rows per pass over a tile (16 accumulators)
constexpr int64_t PF = 1024;   // bytes of weights prefetched ahead
constexpr float AMAX = 63.f;   // activation levels each side of zero
constexpr int ZERO = 64;       // activation offset (a + ZERO is unsigned)

// The instruction set this core was compiled for (simd.h).
inline const char* isa() {
#if defined(VOCALIS_X86) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return "avx512vnni";
#elif defined(VOCALIS_X86)
  return "avx2";
#elif defined(VOCALIS_NEON) && defined(__ARM_FEATURE_DOTPROD)
  return "neon-dotprod";
#elif defined(VOCALIS_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

// K rounded up to a whole block; tiles of N output channels.
inline int64_t padded(int64_t K) { return (K + KB - 1) / KB * KB; }
inline int64_t tiles(int64_t N) { return (N + R - 1) / R; }

// round(v) to nearest, ties to even (the default rounding mode), clamped to [-63, 63].
inline int quantize_one(float v) {
  return std::max(-(int)AMAX, std::min((int)AMAX, (int)std::nearbyint(v)));
}

// Row x [K] float32 -> a [Kp] uint8 = round(x / s) + 64 (64 past K); returns s = max |x| / 63.
// Rounding: to nearest, ties to even (vcvtps2dq under the default MXCSR mode, NEON's fcvtns,
// nearbyint under the default mode): the same bytes on every instruction set.
inline float quantize_row(const float* x, int64_t K, int64_t Kp, uint8_t* a) {
  float amax = 0.f;
  int64_t k = 0;
#if defined(VOCALIS_X86)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  for (float v : lanes) amax = std::max(amax, v);
#elif defined(VOCALIS_NEON)
  float32x4_t vmax = vdupq_n_f32(0.f);
  for (; k + 4 <= K; k += 4) vmax = vmaxq_f32(vmax, vabsq_f32(vld1q_f32(x + k)));
  amax = vmaxvq_f32(vmax);
#endif
  for (; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  const float inv = amax > 0.f ? AMAX / amax : 0.f;
  k = 0;
#if defined(VOCALIS_X86)
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i lo = _mm256_set1_epi8(-(int)AMAX), hi = _mm256_set1_epi8((int)AMAX);
  for (; k + 32 <= K; k += 32) {
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8), vinv));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k + 16), vinv));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k + 24), vinv));
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    b = _mm256_permutevar8x32_epi32(b, order);  // undo the per-lane interleave of the packs
    b = _mm256_min_epi8(_mm256_max_epi8(b, lo), hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + k), _mm256_add_epi8(b, _mm256_set1_epi8(ZERO)));
  }
#elif defined(VOCALIS_NEON)
  const float32x4_t vinv = vdupq_n_f32(inv);
  const int8x16_t lo = vdupq_n_s8(-(int)AMAX), hi = vdupq_n_s8((int)AMAX);
  for (; k + 16 <= K; k += 16) {
    const int32x4_t i0 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + k), vinv));
    const int32x4_t i1 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + k + 4), vinv));
    const int32x4_t i2 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + k + 8), vinv));
    const int32x4_t i3 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + k + 12), vinv));
    const int16x8_t h0 = vcombine_s16(vqmovn_s32(i0), vqmovn_s32(i1));
    const int16x8_t h1 = vcombine_s16(vqmovn_s32(i2), vqmovn_s32(i3));
    int8x16_t b = vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1));
    b = vminq_s8(vmaxq_s8(b, lo), hi);
    vst1q_u8(a + k, vreinterpretq_u8_s8(vaddq_s8(b, vdupq_n_s8(ZERO))));
  }
#endif
  for (; k < Kp; ++k) a[k] = (uint8_t)((k < K ? quantize_one(x[k] * inv) : 0) + ZERO);
  return amax / AMAX;
}

// One tile (4 channels, w [Kp/32][4][32]) against ROWS rows of offset activations:
// out[r][c] = sum_k a_r[k] w_c[k] (the offset not yet removed), exact in int32 whatever the
// instruction set. x86: each 32-bit lane of an accumulator sums the products of its 4 bytes,
// by vpmaddubsw then vpmaddwd (AVX2; the pair sums, at most 2 * 127 * 127, never saturate
// int16), or by one vpdpbusd (the avx512vnni build: -mavx512vnni -mavx512vl). NEON: sdot
// (the neon-dotprod build: -march=armv8.2-a+dotprod), else smull/smlal pairs (at most
// 2 * 127 * 127 in int16) added pairwise into int32 (sadalp).
template <int ROWS>
inline void dot_tile(const int8_t* w, int64_t Kp, const uint8_t* const* a, int32_t (*out)[R]) {
#if defined(VOCALIS_X86)
  __m256i acc[ROWS][R];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = _mm256_setzero_si256();
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t k = 0; k < Kp; k += KB) {
    const int8_t* wk = w + k * R;
    _mm_prefetch(reinterpret_cast<const char*>(wk + PF), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(wk + PF + 64), _MM_HINT_T0);
    __m256i av[ROWS];
    for (int r = 0; r < ROWS; ++r) av[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[r] + k));
#pragma GCC unroll 4
    for (int c = 0; c < R; ++c) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + c * KB));
      for (int r = 0; r < ROWS; ++r)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        acc[r][c] = _mm256_dpbusd_epi32(acc[r][c], av[r], wv);
#else
        acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(av[r], wv), ones));
#endif
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) {
      __m256i v = acc[r][c];
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      out[r][c] = _mm_cvtsi128_si32(s);
    }
#elif defined(VOCALIS_NEON)
  int32x4_t acc[ROWS][R];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = vdupq_n_s32(0);
  for (int64_t k = 0; k < Kp; k += KB) {
    const int8_t* wk = w + k * R;
    vocalis_simd::prefetch(wk + PF);
    vocalis_simd::prefetch(wk + PF + 64);
    int8x16_t a0[ROWS], a1[ROWS];  // a + 64 in [1, 127]: a signed byte as well
    for (int r = 0; r < ROWS; ++r) {
      a0[r] = vreinterpretq_s8_u8(vld1q_u8(a[r] + k));
      a1[r] = vreinterpretq_s8_u8(vld1q_u8(a[r] + k + 16));
    }
    for (int c = 0; c < R; ++c) {
      const int8x16_t w0 = vld1q_s8(wk + c * KB), w1 = vld1q_s8(wk + c * KB + 16);
      for (int r = 0; r < ROWS; ++r) {
#if defined(__ARM_FEATURE_DOTPROD)
        acc[r][c] = vdotq_s32(vdotq_s32(acc[r][c], a0[r], w0), a1[r], w1);
#else
        int16x8_t p = vmull_s8(vget_low_s8(a0[r]), vget_low_s8(w0));
        p = vmlal_high_s8(p, a0[r], w0);
        int16x8_t q = vmull_s8(vget_low_s8(a1[r]), vget_low_s8(w1));
        q = vmlal_high_s8(q, a1[r], w1);
        acc[r][c] = vpadalq_s16(vpadalq_s16(acc[r][c], p), q);
#endif
      }
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) out[r][c] = vaddvq_s32(acc[r][c]);
#else
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) out[r][c] = 0;
  for (int64_t k = 0; k < Kp; k += KB) {
    const int8_t* wk = w + k * R;
    vocalis_simd::prefetch(wk + PF);
    for (int c = 0; c < R; ++c)
      for (int r = 0; r < ROWS; ++r) {
        int32_t s = 0;
        for (int64_t i = 0; i < KB; ++i) s += int32_t(a[r][k + i]) * int32_t(wk[c * KB + i]);
        out[r][c] += s;
      }
  }
#endif
}

// Tiles t0 .. t1 - 1 (of tiles(N)) of Y [M, N] from the rows quantized by quantize_row
// (A [M, Kp] offset bytes, SX [M] their scales) and the weights packed by pack (W tiles,
// S [N] scales, Z [N] sums): Y[m, n] = (SX[m] * S[n]) * (acc - 64 Z[n]).
inline void linear(const uint8_t* A, const float* SX, const int8_t* W, const float* S,
                   const int32_t* Z, float* Y, int64_t M, int64_t N, int64_t Kp, int64_t t0,
                   int64_t t1) {
  int32_t o[MR][R];
  for (int64_t t = t0; t < t1; ++t) {
    const int8_t* wt = W + t * R * Kp;
    const int64_t n0 = t * R, nr = std::min<int64_t>(R, N - n0);
    for (int64_t m = 0; m < M; m += MR) {
      const int rows = (int)std::min<int64_t>(MR, M - m);
      const uint8_t* ar[MR];
      for (int r = 0; r < MR; ++r) ar[r] = A + (m + std::min(r, rows - 1)) * Kp;
      switch (rows) {
        case 4: dot_tile<4>(wt, Kp, ar, o); break;
        case 3: dot_tile<3>(wt, Kp, ar, o); break;
        case 2: dot_tile<2>(wt, Kp, ar, o); break;
        default: dot_tile<1>(wt, Kp, ar, o);
      }
      for (int r = 0; r < rows; ++r)
        for (int64_t c = 0; c < nr; ++c)
          Y[(m + r) * N + n0 + c] = (SX[m + r] * S[n0 + c]) * (float)(o[r][c] - ZERO * Z[n0 + c]);
    }
  }
}

// Channels n0 .. n1 - 1 of w [N, K] float32 into the tiles P [ceil(N/4), 4*Kp] int8 (zeroed
// before: zero past N and K), scales S [N] float32 and sums Z [N] int32 (of each channel's int8
// weights), Kp = padded(K): channel n's block b (inputs 32b..32b+31) lies at row n/4, bytes
// (b*4 + n%4)*32.
inline void pack(const float* Wp, int64_t K, int8_t* P, float* S, int32_t* Z, int64_t n0,
                 int64_t n1) {
  const int64_t Kp = padded(K);
  for (int64_t n = n0; n < n1; ++n) {
    const float* row = Wp + n * K;
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    S[n] = amax / 127.f;
    int8_t* tile = P + (n / R) * R * Kp + (n % R) * KB;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int q = std::max(-127, std::min(127, (int)std::nearbyint(row[k] * inv)));
      tile[(k / KB) * R * KB + k % KB] = (int8_t)q;
      sum += q;
    }
    Z[n] = sum;
  }
}

}  // namespace q8_core
