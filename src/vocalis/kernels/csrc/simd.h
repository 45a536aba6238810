// vocalis: which instruction set the kernels' cores (f32_core.h, q8_core.h, q4_core.h) are
// compiled for, chosen by the compiler's own macros (the flags of the build variant:
// vocalis/kernels/cpu.py), and the few helpers every core shares. No PyTorch here: the
// cores build into the torch ops (f32.cpp, q8.cpp, q4.cpp) and into the standalone
// selftest.cpp alike.
//
//   VOCALIS_X86      x86-64 with AVX2 and FMA (-mavx2 -mfma); the int8 core also uses
//                    AVX-512 VNNI where the build has it (-mavx512vl -mavx512vnni), and the
//                    float32 core 512-bit registers where it has AVX-512 F and VL
//                    (VOCALIS_AVX512, below)
//   VOCALIS_NEON     AArch64 (NEON is part of every AArch64 CPU); the int8 and int4 cores
//                    use the dot-product instructions where the build has them
//                    (-march=armv8.2-a+dotprod: __ARM_FEATURE_DOTPROD)
//   VOCALIS_SCALAR   anything else, or -DVOCALIS_FORCE_SCALAR: portable C++
//
// Every instruction set computes the same values bit for bit: the integer sums are exact,
// and the float32 operations run in one fixed order (8 lanes, summed as hsum8 below says)
// that each instruction set reproduces.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if !defined(VOCALIS_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__)
#define VOCALIS_X86 1
#include <immintrin.h>
#if defined(__AVX512F__) && defined(__AVX512VL__)
#define VOCALIS_AVX512 1
#endif
#elif !defined(VOCALIS_FORCE_SCALAR) && defined(__aarch64__) && defined(__ARM_NEON)
#define VOCALIS_NEON 1
#include <arm_neon.h>
#else
#define VOCALIS_SCALAR 1
#endif

namespace vocalis_simd {

// Ask for the cache line at p (a hint: no effect on results).
inline void prefetch(const void* p) {
#if defined(VOCALIS_X86)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Ask for the cache line at p into the second-level cache, for data read some microseconds
// later (a hint: no effect on results).
inline void prefetch_l2(const void* p) {
#if defined(VOCALIS_X86)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// A spin-wait pause (lend.h's polling loops).
inline void relax() {
#if defined(VOCALIS_X86)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// A bfloat16 is the top half of the float32 of the same value: widening is exact.
inline float widen(uint16_t v) {
  const uint32_t b = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The fixed order in which 8 float32 lanes a[0..7] are summed, whatever the instruction set:
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) (AVX2's two halves added, then the
// halves of that).
inline float hsum8(const float* a) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

#if defined(VOCALIS_X86)
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#elif defined(VOCALIS_NEON)
// 8 lanes held as two vectors: lo = a[0..3], hi = a[4..7]. Not vaddvq_f32, whose order is
// another.
inline float hsum8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
  return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}
#endif

// Eight float32 lanes (f32x8) and the few operations the float32 products need, per
// instruction set; fma8(x, w, acc) is acc + x * w rounded once, lane by lane; add8(a, b) is
// a + b lane by lane.
#if defined(VOCALIS_X86)
using f32x8 = __m256;
inline f32x8 zero8() { return _mm256_setzero_ps(); }
inline f32x8 load8(const float* p) { return _mm256_loadu_ps(p); }
inline f32x8 fma8(f32x8 x, f32x8 w, f32x8 acc) { return _mm256_fmadd_ps(x, w, acc); }
inline f32x8 add8(f32x8 a, f32x8 b) { return _mm256_add_ps(a, b); }
inline f32x8 bcast8(const float* p) { return _mm256_broadcast_ss(p); }  // *p in every lane
inline void store8(float* p, f32x8 v) { _mm256_storeu_ps(p, v); }
inline float sum8(f32x8 v) { return hsum8(v); }
inline f32x8 widen8(const uint16_t* p) {  // 8 bfloat16 -> their float32 values
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#elif defined(VOCALIS_NEON)
struct f32x8 {
  float32x4_t lo, hi;
};
inline f32x8 zero8() { return {vdupq_n_f32(0.f), vdupq_n_f32(0.f)}; }
inline f32x8 load8(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline f32x8 fma8(f32x8 x, f32x8 w, f32x8 acc) {
  return {vfmaq_f32(acc.lo, x.lo, w.lo), vfmaq_f32(acc.hi, x.hi, w.hi)};
}
inline f32x8 add8(f32x8 a, f32x8 b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
inline f32x8 bcast8(const float* p) {
  const float32x4_t v = vld1q_dup_f32(p);
  return {v, v};
}
inline void store8(float* p, f32x8 v) {
  vst1q_f32(p, v.lo);
  vst1q_f32(p + 4, v.hi);
}
inline float sum8(f32x8 v) { return hsum8(v.lo, v.hi); }
inline f32x8 widen8(const uint16_t* p) {
  const uint16x8_t h = vld1q_u16(p);
  return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
          vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
}
#else
struct f32x8 {
  float a[8];
};
inline f32x8 zero8() { return {}; }
inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(v.a, p, sizeof v.a);
  return v;
}
inline f32x8 fma8(f32x8 x, f32x8 w, f32x8 acc) {
  for (int j = 0; j < 8; ++j) acc.a[j] = std::fma(x.a[j], w.a[j], acc.a[j]);
  return acc;
}
inline f32x8 add8(f32x8 a, f32x8 b) {
  for (int j = 0; j < 8; ++j) a.a[j] += b.a[j];
  return a;
}
inline f32x8 bcast8(const float* p) {
  f32x8 v;
  for (int j = 0; j < 8; ++j) v.a[j] = *p;
  return v;
}
inline void store8(float* p, f32x8 v) { std::memcpy(p, v.a, sizeof v.a); }
inline float sum8(f32x8 v) { return hsum8(v.a); }
inline f32x8 widen8(const uint16_t* p) {
  f32x8 v;
  for (int j = 0; j < 8; ++j) v.a[j] = widen(p[j]);
  return v;
}
#endif

}  // namespace vocalis_simd
