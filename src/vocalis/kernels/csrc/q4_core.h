// vocalis: the arithmetic of the 4-bit weight-only linear (q4.cpp registers it as
// torch.ops.vocalis_q4; selftest.cpp runs it without PyTorch): plain pointers and sizes, one
// source for every instruction set (simd.h: AVX2 + FMA, NEON, NEON with the dot-product
// instructions, portable C++), the same results bit for bit on each.
//
// Weights: blocks of 32 along the input dimension, one float32 scale per block (the block
// layout of GGML's Q4_0, with a float32 scale; Q4_0 rounds to -8..7 with d = max / -8, here
// d = max |w| / 7 so that zero is exact and the range symmetric). Activations: blocks of 32
// quantized to int8 per call (GGML's Q8_0 layout). Per block the integer dot product is exact
// (x86: vpmaddubsw of the unsigned nibbles with the signed activations; NEON: sdot, or
// smull/smlal; then the +8 offset removed through the block sum of the activations); the
// block products are scaled and summed in float32 in a fixed order per output (8 lanes by
// fused multiply-add, the lanes in simd.h's hsum8 order), so a row's result does not depend on
// the other rows of the call, on the thread count, or on the instruction set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "simd.h"

namespace q4_core {

constexpr int64_t NT = 8;  // output channels unpacked together, reused for every row of x

// The instruction set this core was compiled for (simd.h).
inline const char* isa() {
#if defined(VOCALIS_X86)
  return "avx2";
#elif defined(VOCALIS_NEON) && defined(__ARM_FEATURE_DOTPROD)
  return "neon-dotprod";
#elif defined(VOCALIS_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

// K rounded up to 256 (whole groups of 8 blocks).
inline int64_t padded(int64_t K) { return (K + 255) / 256 * 256; }

// Rows of x [M, K] float32 -> q [M, Kp] int8 (zero past K) and d [M, Kp/32] float32: per block
// of 32, d = max |x| / 127 and q = round(x / d) (Q8_0 of llama.cpp/GGML: the activation side).
// c [M, Kp/32] int32: 8 * sum of the block's q (the weights' +8 offset, see dot_row).
inline void quantize_rows(const float* x, int64_t M, int64_t K, int64_t Kp, int8_t* q, float* d,
                          int32_t* c) {
  const int64_t B = Kp / 32;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t k0 = b * 32, n = std::max<int64_t>(0, std::min<int64_t>(32, K - k0));
      const float* xb = x + m * K + k0;
      float amax = 0.f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      int8_t* qb = q + m * Kp + k0;
      int32_t s = 0;
      for (int64_t i = 0; i < 32; ++i) {
        qb[i] = i < n ? (int8_t)std::nearbyint(xb[i] * inv) : 0;
        s += qb[i];
      }
      d[m * B + b] = amax / 127.f;
      c[m * B + b] = 8 * s;
    }
}

#if defined(VOCALIS_X86)
inline __m256i unpack32(const uint8_t* p) {  // 32 nibbles -> 32 bytes in [0, 15]
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
}

// sum over 32 of w (u8, 0..15) * a (s8) as 8 int32 partial sums
inline __m256i dot32(__m256i w, const int8_t* a) {
  return _mm256_madd_epi16(
      _mm256_maddubs_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_set1_epi16(1));
}

// 8 vectors of 8 int32 -> one vector whose lane j is the sum of vector j
inline __m256i reduce8(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i p4, __m256i p5,
                       __m256i p6, __m256i p7) {
  __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
  __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p4, p5), _mm256_hadd_epi32(p6, p7));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}
#elif defined(VOCALIS_NEON)
// 16 packed bytes (32 nibbles) -> bytes 0..15 (low nibbles) and 16..31 (high ones), in [0, 15]
inline void unpack32(const uint8_t* p, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t raw = vld1q_u8(p);
  lo = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F)));
  hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
}

// sum over 32 of w (0..15, held as signed bytes) * a (s8) as 4 int32 partial sums, exact:
// sdot, or products of at most 15 * 127 summed 4 at a time in int16 then pairwise in int32
inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* a) {
  const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, a0), w1, a1);
#else
  int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
  p = vmlal_high_s8(p, w0, a0);
  p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(a1));
  p = vmlal_high_s8(p, w1, a1);
  return vpaddlq_s16(p);
#endif
}

// 4 vectors of 4 int32 -> one vector whose lane j is the sum of vector j
inline int32x4_t reduce4(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
  return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}
#endif

// One output: sum_b sw[b] * dx[b] * (sum_i w_u[b,i] a[b,i] - 8 sum_i a[b,i]).
// PACKED: w holds nibbles (16 bytes per block), else unpacked bytes (32 per block).
// B % 8 == 0. sw: float weight scales; dx: activation scales; corr: 8 * block sums of a.
// Block b + j of each group of 8 goes to lane j: acc_j = fma(sw * dx, float(block sum), acc_j),
// then the lanes in hsum8's order.
template <bool PACKED>
inline float dot_row(const uint8_t* w, const float* sw, const int8_t* a, const float* dx,
                     const int32_t* corr, int64_t B) {
  constexpr int WB = PACKED ? 16 : 32;
#if defined(VOCALIS_X86)
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < B; b += 8) {
    if (PACKED) {  // one row's weights are one stream: ask for them 1 KB ahead (faster at one
      // row when the weights come from memory; docs/performance.md)
      _mm_prefetch(reinterpret_cast<const char*>(w + b * WB + 1024), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w + b * WB + 1024 + 64), _MM_HINT_T0);
    }
    __m256i p[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const uint8_t* wj = w + (b + j) * WB;
      __m256i wv = PACKED ? unpack32(wj) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj));
      p[j] = dot32(wv, a + (b + j) * 32);
    }
    __m256i s = _mm256_sub_epi32(reduce8(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + b)));
    __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(sw + b), _mm256_loadu_ps(dx + b));
    acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s), acc);
  }
  return vocalis_simd::hsum8(acc);
#elif defined(VOCALIS_NEON)
  float32x4_t lo = vdupq_n_f32(0.f), hi = vdupq_n_f32(0.f);  // lanes 0..3 and 4..7
  for (int64_t b = 0; b < B; b += 8) {
    if (PACKED) {
      vocalis_simd::prefetch(w + b * WB + 1024);
      vocalis_simd::prefetch(w + b * WB + 1024 + 64);
    }
    int32x4_t p[8];
    for (int j = 0; j < 8; ++j) {
      const uint8_t* wj = w + (b + j) * WB;
      int8x16_t w0, w1;
      if (PACKED) {
        unpack32(wj, w0, w1);
      } else {
        w0 = vreinterpretq_s8_u8(vld1q_u8(wj));
        w1 = vreinterpretq_s8_u8(vld1q_u8(wj + 16));
      }
      p[j] = dot32(w0, w1, a + (b + j) * 32);
    }
    const int32x4_t s0 = vsubq_s32(reduce4(p[0], p[1], p[2], p[3]), vld1q_s32(corr + b));
    const int32x4_t s1 = vsubq_s32(reduce4(p[4], p[5], p[6], p[7]), vld1q_s32(corr + b + 4));
    lo = vfmaq_f32(lo, vmulq_f32(vld1q_f32(sw + b), vld1q_f32(dx + b)), vcvtq_f32_s32(s0));
    hi = vfmaq_f32(hi, vmulq_f32(vld1q_f32(sw + b + 4), vld1q_f32(dx + b + 4)), vcvtq_f32_s32(s1));
  }
  return vocalis_simd::hsum8(lo, hi);
#else
  float acc[8] = {};
  for (int64_t b = 0; b < B; b += 8)
    for (int j = 0; j < 8; ++j) {
      const uint8_t* wj = w + (b + j) * WB;
      const int8_t* aj = a + (b + j) * 32;
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) {
        const int wu = PACKED ? (i < 16 ? wj[i] & 15 : wj[i - 16] >> 4) : wj[i];
        s += wu * aj[i];
      }
      s -= corr[b + j];
      acc[j] = std::fma(sw[b + j] * dx[b + j], (float)s, acc[j]);
    }
  return vocalis_simd::hsum8(acc);
#endif
}

// Channels n0 .. n1 - 1 of a one-row product: Y[n] for the row quantized by quantize_rows
// (Q [Kp] int8, D [B] scales, C [B] offset sums) and the weights packed by pack
// (W [N, Kp/2] nibbles, S [N, B] scales), B = Kp / 32.
inline void linear_row(const uint8_t* W, const float* S, const int8_t* Q, const float* D,
                       const int32_t* C, float* Y, int64_t Kp, int64_t n0, int64_t n1) {
  const int64_t B = Kp / 32, KB = Kp / 2;
  for (int64_t n = n0; n < n1; ++n) Y[n] = dot_row<true>(W + n * KB, S + n * B, Q, D, C, B);
}

// Tiles t0 .. t1 - 1 (of ceil(N / NT)) of a product of M rows: the NT channels of a tile
// unpacked to bytes once, then each row against them. The same results as linear_row.
inline void linear_rows(const uint8_t* W, const float* S, const int8_t* Q, const float* D,
                        const int32_t* C, float* Y, int64_t M, int64_t N, int64_t Kp, int64_t t0,
                        int64_t t1) {
  const int64_t B = Kp / 32, KB = Kp / 2;
  std::vector<uint8_t> wt(NT * Kp);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t n0 = t * NT, nr = std::min<int64_t>(NT, N - n0);
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t b = 0; b < B; ++b) {
        const uint8_t* src = W + (n0 + r) * KB + b * 16;
        uint8_t* dst = wt.data() + r * Kp + b * 32;
#if defined(VOCALIS_X86)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), unpack32(src));
#elif defined(VOCALIS_NEON)
        int8x16_t lo, hi;
        unpack32(src, lo, hi);
        vst1q_u8(dst, vreinterpretq_u8_s8(lo));
        vst1q_u8(dst + 16, vreinterpretq_u8_s8(hi));
#else
        for (int j = 0; j < 16; ++j) {
          dst[j] = src[j] & 15;
          dst[j + 16] = src[j] >> 4;
        }
#endif
      }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = 0; r < nr; ++r)
        Y[m * N + n0 + r] = dot_row<false>(wt.data() + r * Kp, S + (n0 + r) * B, Q + m * Kp,
                                           D + m * B, C + m * B, B);
  }
}

// Channels n0 .. n1 - 1 of w [N, K] float32 -> packed P [N, Kp/2] uint8 and scales S [N, Kp/32]
// float32, Kp = padded(K) (zero weights past K). Per block of 32 along K: d = max |w| / 7,
// q = clamp(round(w / d), -8, 7), stored as q + 8 in a nibble: byte j of a block holds element
// j (low) and element j + 16 (high).
inline void pack(const float* Wp, int64_t K, uint8_t* P, float* S, int64_t n0, int64_t n1) {
  const int64_t Kp = padded(K), B = Kp / 32;
  float blk[32];
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t b = 0; b < B; ++b) {
      float amax = 0.f;
      for (int64_t i = 0; i < 32; ++i) {
        const int64_t k = b * 32 + i;
        blk[i] = k < K ? Wp[n * K + k] : 0.f;
        amax = std::max(amax, std::fabs(blk[i]));
      }
      const float d = amax / 7.f, inv = amax > 0.f ? 7.f / amax : 0.f;
      S[n * B + b] = d;
      for (int j = 0; j < 16; ++j) {
        const int lo = std::min(7, std::max(-8, (int)std::nearbyint(blk[j] * inv))) + 8;
        const int hi = std::min(7, std::max(-8, (int)std::nearbyint(blk[j + 16] * inv))) + 8;
        P[n * (Kp / 2) + b * 16 + j] = (uint8_t)(lo | (hi << 4));
      }
    }
}

}  // namespace q4_core
