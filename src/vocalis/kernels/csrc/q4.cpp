// vocalis: 4-bit weight-only linear for x86 CPUs with AVX2 (Qwen3-TTS quantize="int4").
//
// Weights: blocks of 32 along the input dimension, one float32 scale per block (the block
// layout of GGML's Q4_0, with a float32 scale; Q4_0 rounds to -8..7 with d = max / -8, here
// d = max |w| / 7 so that zero is exact and the range symmetric). Activations: blocks of 32
// quantized to int8 per call (GGML's Q8_0 layout). Per block the integer dot product is exact
// (vpmaddubsw of the unsigned nibbles with the signed activations, then the +8 offset removed
// through the block sum of the activations); the block products are scaled and summed in
// float32 in a fixed order per output, so a row's result does not depend on the other rows
// of the call or on the thread count. Built once per machine by `vocalis kernels build`
// (vocalis/kernels/native.py).
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <cstdint>

#include "lend.h"

static inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Rows of x [M, K] float32 -> q [M, Kp] int8 (zero past K) and d [M, Kp/32] float32: per block
// of 32, d = max |x| / 127 and q = round(x / d) (Q8_0 of llama.cpp/GGML: the activation side).
// c [M, Kp/32] int32: 8 * sum of the block's q (the weights' +8 offset, see dot_row).
static void quantize_rows(const float* x, int64_t M, int64_t K, int64_t Kp, int8_t* q, float* d,
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

static inline __m256i unpack32(const uint8_t* p) {  // 32 nibbles -> 32 bytes in [0, 15]
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
}

// sum over 32 of w (u8, 0..15) * a (s8) as 8 int32 partial sums
static inline __m256i dot32(__m256i w, const int8_t* a) {
  return _mm256_madd_epi16(
      _mm256_maddubs_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_set1_epi16(1));
}

// 8 vectors of 8 int32 -> one vector whose lane j is the sum of vector j
static inline __m256i reduce8(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i p4,
                              __m256i p5, __m256i p6, __m256i p7) {
  __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
  __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p4, p5), _mm256_hadd_epi32(p6, p7));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// One output: sum_b sw[b] * dx[b] * (sum_i w_u[b,i] a[b,i] - 8 sum_i a[b,i]).
// PACKED: w holds nibbles (16 bytes per block), else unpacked bytes (32 per block).
// B % 8 == 0. sw: float weight scales; dx: activation scales; corr: 8 * block sums of a.
template <bool PACKED>
static inline float dot_row(const uint8_t* w, const float* sw, const int8_t* a, const float* dx,
                            const int32_t* corr, int64_t B) {
  __m256 acc = _mm256_setzero_ps();
  constexpr int WB = PACKED ? 16 : 32;
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
  return hsum8(acc);
}

torch::Tensor q4_linear(torch::Tensor x, torch::Tensor packed, torch::Tensor scales) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "q4_linear: x must be float32");
  TORCH_CHECK(scales.scalar_type() == torch::kFloat32, "q4_linear: scales must be float32");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1);
  const int64_t M = K > 0 ? xs.numel() / K : 0;
  const int64_t N = packed.size(0);
  const int64_t KB = packed.size(1), Kp = 2 * KB, B = Kp / 32;
  TORCH_CHECK(Kp % 256 == 0 && Kp >= K && Kp - K < 256 && scales.size(0) == N && scales.size(1) == B,
              "q4_linear: x [..., K] does not match packed [N, Kp/2] and scales [N, Kp/32]");
  TORCH_CHECK(packed.is_contiguous() && scales.is_contiguous(), "q4_linear: packed weights must be contiguous");
  auto q = torch::empty({M, Kp}, torch::kInt8);
  auto d = torch::empty({M, B}, torch::kFloat32);
  auto c = torch::empty({M, B}, torch::kInt32);
  quantize_rows(xs.data_ptr<float>(), M, K, Kp, q.data_ptr<int8_t>(), d.data_ptr<float>(),
                c.data_ptr<int32_t>());
  const int8_t* Q = q.data_ptr<int8_t>();
  const int32_t* C = c.data_ptr<int32_t>();
  std::vector<int64_t> shape(xs.sizes().begin(), xs.sizes().end());
  shape.back() = N;
  auto y = torch::empty(shape, torch::kFloat32);
  const uint8_t* W = packed.data_ptr<uint8_t>();
  const float* S = scales.data_ptr<float>();
  const float* D = d.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  if (M == 1) {
    vocalis_lend::parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) Y[n] = dot_row<true>(W + n * KB, S + n * B, Q, D, C, B);
    });
    return y;
  }
  constexpr int64_t NT = 8;  // output channels unpacked together, reused for every row of x
  vocalis_lend::parallel_for((N + NT - 1) / NT, 1, [&](int64_t t0, int64_t t1) {
    std::vector<uint8_t> wt(NT * Kp);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * NT, nr = std::min<int64_t>(NT, N - n0);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t b = 0; b < B; ++b)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(wt.data() + r * Kp + b * 32),
                              unpack32(W + (n0 + r) * KB + b * 16));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t r = 0; r < nr; ++r)
          Y[m * N + n0 + r] = dot_row<false>(wt.data() + r * Kp, S + (n0 + r) * B, Q + m * Kp,
                                            D + m * B, C + m * B, B);
    }
  });
  return y;
}

// w [N, K] float32 -> packed [N, Kp/2] uint8 and scales [N, Kp/32] float32, Kp = K rounded up to
// 256 (zero weights past K). Per block of 32 along K: d = max |w| / 7, q = clamp(round(w / d), -8, 7),
// stored as q + 8 in a nibble: byte j of a block holds element j (low) and element j + 16 (high).
std::vector<torch::Tensor> q4_pack(torch::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32, "q4_pack: w must be float32 [N, K]");
  auto ws = w.contiguous();
  const int64_t N = ws.size(0), K = ws.size(1), Kp = (K + 255) / 256 * 256, B = Kp / 32;
  auto packed = torch::empty({N, Kp / 2}, torch::kUInt8);
  auto scales = torch::empty({N, B}, torch::kFloat32);
  const float* Wp = ws.data_ptr<float>();
  uint8_t* P = packed.data_ptr<uint8_t>();
  float* S = scales.data_ptr<float>();
  at::parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
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
  });
  return {packed, scales};
}

TORCH_LIBRARY(vocalis_q4, m) {
  m.def("lend(bool on) -> ()", &vocalis_lend::lend);  // the codec's idle core (lend.h)
  m.def("lent_blocks() -> int", &vocalis_lend::lent_blocks);
  m.def("linear(Tensor x, Tensor packed, Tensor scales) -> Tensor");
  m.impl("linear", torch::kCPU, &q4_linear);
  m.def("pack(Tensor w) -> Tensor[]");
  m.impl("pack", torch::kCPU, &q4_pack);
}
