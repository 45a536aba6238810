// vocalis: int8 linear for x86 CPUs with AVX2 (Qwen3-TTS quantize="int8").
//
// Weights: int8 per output channel, s_n = max_k |w[n, k]| / 127, q = clamp(round(w / s_n), -127, 127),
// stored in tiles of 4 output channels interleaved by blocks of 32 inputs ([N/4][K/32][4][32]
// bytes), so that a one-row call reads the weights as one sequential stream (with a software
// prefetch ahead): at one row the product is bound by memory reads, and this layout reads them
// faster than fbgemm's packed int8 (figures: docs/performance.md, the Qwen3-TTS notes).
// Activations: each row quantized per call, s_m = max_k |x[m, k]| / 63, a = round(x / s_m) in
// [-63, 63] (the precision of fbgemm's dynamic int8 with reduce_range), stored as a + 64 in
// [1, 127] so that vpmaddubsw (unsigned by signed bytes, pair sums within int16: 2 * 127 * 127)
// needs no sign fix-up; the offset is removed through the weights' per-channel sums:
// sum_k a_k q_nk = sum_k (a_k + 64) q_nk - 64 sum_k q_nk, exact in int32, and
// y[m, n] = (s_m * s_n) * acc[m, n] in float32. A row's result therefore does not depend on the
// other rows of the call, on how rows are grouped, or on the thread count. Built once per machine
// by `vocalis kernels build` (vocalis/kernels/native.py).
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <cstdint>

#include "lend.h"

namespace {

constexpr int64_t R = 4;       // output channels per tile
constexpr int64_t KB = 32;     // inputs per block
constexpr int64_t PF = 1024;   // bytes of weights prefetched ahead
constexpr float AMAX = 63.f;   // activation levels each side of zero
constexpr int ZERO = 64;       // activation offset (a + ZERO is unsigned)

inline int32_t hsum8i(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Row x [K] float32 -> a [Kp] uint8 = round(x / s) + 64 (64 past K); returns s = max |x| / 63.
// Rounding: to nearest, ties to even (vcvtps2dq and nearbyint under the default MXCSR mode).
float quantize_row(const float* x, int64_t K, int64_t Kp, uint8_t* a) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float amax = 0.f;
  for (float v : lanes) amax = std::max(amax, v);
  for (; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  const float inv = amax > 0.f ? AMAX / amax : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i lo = _mm256_set1_epi8(-(int)AMAX), hi = _mm256_set1_epi8((int)AMAX);
  k = 0;
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
  for (; k < Kp; ++k) {
    const int q = k < K ? std::max(-(int)AMAX, std::min((int)AMAX, (int)std::nearbyint(x[k] * inv))) : 0;
    a[k] = (uint8_t)(q + ZERO);
  }
  return amax / AMAX;
}

// One tile (4 channels, w [Kp/32][4][32]) against ROWS rows of offset activations:
// out[r][c] = sum_k a_r[k] w_c[k] (the offset not yet removed). Each 32-bit lane of an
// accumulator sums the products of its 4 bytes, exactly: vpmaddubsw then vpmaddwd (AVX2; the
// pair sums, at most 2 * 127 * 127, never saturate int16), or one vpdpbusd (the avx512vnni build:
// -mavx512vnni -mavx512vl). The same int32 sums either way, so the same results bit for bit.
template <int ROWS>
inline void dot_tile(const int8_t* w, int64_t Kp, const uint8_t* const* a, int32_t (*out)[R]) {
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
    for (int c = 0; c < R; ++c) out[r][c] = hsum8i(acc[r][c]);
}

}  // namespace

// x [..., K] float32, w [ceil(N/4), 4*Kp] int8 (tiles, see pack), scales [N] float32, sums [N] int32
// -> y [..., N] float32.
torch::Tensor q8_linear(torch::Tensor x, torch::Tensor w, torch::Tensor scales, torch::Tensor sums) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "q8_linear: x must be float32");
  TORCH_CHECK(w.scalar_type() == torch::kInt8 && w.dim() == 2 && w.is_contiguous(),
              "q8_linear: w must be contiguous int8 [N/4, 4*Kp]");
  TORCH_CHECK(scales.scalar_type() == torch::kFloat32 && scales.is_contiguous() &&
              sums.scalar_type() == torch::kInt32 && sums.is_contiguous() && sums.numel() == scales.numel(),
              "q8_linear: scales must be float32 [N] and sums int32 [N]");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1), M = K > 0 ? xs.numel() / K : 0, N = scales.size(0);
  const int64_t T = w.size(0), Kp = w.size(1) / R;
  TORCH_CHECK(T == (N + R - 1) / R && Kp % KB == 0 && Kp >= K && Kp - K < KB,
              "q8_linear: x [..., K] does not match w [N/4, 4*Kp] and scales [N]");
  // the caller's quantized rows and their scales, kept per thread between calls (a frame
  // makes hundreds of calls); the lent core reads them while the caller waits for it
  thread_local std::vector<uint8_t> act;
  thread_local std::vector<float> sx;
  act.resize(std::max<int64_t>(M, 1) * Kp);
  sx.resize(M);
  uint8_t* A = act.data();
  float* SX = sx.data();  // (a lambda names thread_local variables of the thread it runs on)
  const float* X = xs.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) SX[m] = quantize_row(X + m * K, K, Kp, A + m * Kp);
  std::vector<int64_t> shape(xs.sizes().begin(), xs.sizes().end());
  shape.back() = N;
  auto y = torch::empty(shape, torch::kFloat32);
  const int8_t* W = w.data_ptr<int8_t>();
  const float* S = scales.data_ptr<float>();
  const int32_t* Z = sums.data_ptr<int32_t>();
  float* Y = y.data_ptr<float>();
  constexpr int64_t MR = 4;  // rows per pass over a tile (16 accumulators)
  vocalis_lend::parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
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
  });
  return y;
}

// w [N, K] float32 -> {tiles [ceil(N/4), 4*Kp] int8, scales [N] float32, sums [N] int32 (of each
// channel's int8 weights)}, Kp = K rounded up to 32:
// channel n's block b (inputs 32b..32b+31) lies at row n/4, bytes (b*4 + n%4)*32; zero past N and K.
std::vector<torch::Tensor> q8_pack(torch::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32, "q8_pack: w must be float32 [N, K]");
  auto ws = w.contiguous();
  const int64_t N = ws.size(0), K = ws.size(1), Kp = (K + KB - 1) / KB * KB, T = (N + R - 1) / R;
  auto tiles = torch::zeros({T, R * Kp}, torch::kInt8);
  auto scales = torch::empty({N}, torch::kFloat32);
  auto sums = torch::empty({N}, torch::kInt32);
  int32_t* Z = sums.data_ptr<int32_t>();
  const float* Wp = ws.data_ptr<float>();
  int8_t* P = tiles.data_ptr<int8_t>();
  float* S = scales.data_ptr<float>();
  at::parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
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
  });
  return {tiles, scales, sums};
}

TORCH_LIBRARY(vocalis_q8, m) {
  m.def("lend(bool on) -> ()", &vocalis_lend::lend);  // the codec's idle core (lend.h)
  m.def("lent_blocks() -> int", &vocalis_lend::lent_blocks);
  m.def("linear(Tensor x, Tensor w, Tensor scales, Tensor sums) -> Tensor");
  m.impl("linear", torch::kCPU, &q8_linear);
  m.def("pack(Tensor w) -> Tensor[]");
  m.impl("pack", torch::kCPU, &q8_pack);
}
