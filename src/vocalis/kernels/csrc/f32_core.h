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
// over a tile (12 accumulators of 8 lanes; with AVX-512, up to 6 rows, each accumulator a
// 512-bit register holding two channels' 8 lanes, so a tile's weights are widened once per 6
// rows instead of once per 3). y[m, n] = sum over k of x[m, k] w[n, k], summed in
// a fixed order (8 lanes by fused multiply-add over k, then the lanes in simd.h's hsum8
// order, then the last K % 8 terms by fused multiply-add) that depends on K alone: a row's
// result does not depend on the other rows of the call, on how rows are grouped, on the
// thread count, or on the instruction set.
//
// Prompt passes (many rows, the same bfloat16 tiles) have a GEMM of their own below
// (bf16_gemm: weights widened once per block into an L1-resident panel, outer products of 6
// rows by 16 channels), with its own fixed order of summing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace f32_core {

using namespace vocalis_simd;

constexpr int64_t R = 4;            // output channels per tile
#if defined(VOCALIS_AVX512)
constexpr int64_t MR = 6;           // rows per pass over a tile
#else
constexpr int64_t MR = 3;
#endif
constexpr int64_t PF_BYTES = 1024;  // prefetched ahead per channel (a tile: 4 KB of its stream)

// The instruction set this core was compiled for (simd.h).
inline const char* isa() {
#if defined(VOCALIS_AVX512)
  return "avx512";
#elif defined(VOCALIS_X86)
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
#if defined(VOCALIS_AVX512)
  // channels c and c + 1 (c even): c's 8 values of k in the low half, c + 1's in the high
  __m512 v2(int c, int64_t k) const {
    const __m256d lo = _mm256_castps_pd(load8(w[c] + k));
    const __m256d hi = _mm256_castps_pd(load8(w[c + 1] + k));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(lo), hi, 1));
  }
#endif
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
#if defined(VOCALIS_AVX512)
  // channels c and c + 1 (c even), adjacent in a block: 16 bfloat16 widened at once
  __m512 v2(int c, int64_t k) const {
    const uint16_t* b = p + (k / 8) * 32 + c * 8;
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#endif
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
#if defined(VOCALIS_AVX512)
// dot_tile for 4 to 6 rows with AVX-512: a 512-bit accumulator holds two channels' 8 lanes
// (channels 0-1, 2-3), each lane summing the same k as an AVX2 lane; a row's 8 values of k are
// in both halves of its register. The same operations per lane, so the same bits; the tile's
// weights are widened once per 6 rows instead of once per 3. (Fewer rows run dot_tile: at 1 to
// 3 rows this form measured no faster on an AMD EPYC Zen 4.)
inline __m512 bcast8x2(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}

inline f32x8 half8(__m512 a, int h) {  // the 8 lanes of channel 2 j + h of a pair register
  return h == 0 ? _mm512_castps512_ps256(a)
                : _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}

template <int ROWS, typename Src>
inline void dot_tile_pairs(const Src& w, int64_t K, const float* const* x, float (*out)[R]) {
  __m512 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    w.prefetch(k);
    for (int64_t h = 0; h < 16; h += 8) {
      const __m512 w01 = w.v2(0, k + h), w23 = w.v2(2, k + h);
      for (int r = 0; r < ROWS; ++r) {
        const __m512 xv = bcast8x2(x[r] + k + h);
        acc[r][0] = _mm512_fmadd_ps(xv, w01, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(xv, w23, acc[r][1]);
      }
    }
  }
  for (; k + 8 <= K; k += 8) {
    const __m512 w01 = w.v2(0, k), w23 = w.v2(2, k);
    for (int r = 0; r < ROWS; ++r) {
      const __m512 xv = bcast8x2(x[r] + k);
      acc[r][0] = _mm512_fmadd_ps(xv, w01, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xv, w23, acc[r][1]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < R; ++c) {
      float s = sum8(half8(acc[r][c / 2], c % 2));
      for (int64_t t = k; t < K; ++t) s = std::fma(x[r][t], w.s(c, t), s);
      out[r][c] = s;
    }
}
#endif

// Tiles t0 .. t1 - 1 of Y [M, N] = X [M, K] W^T, the rows in passes of up to MR over each tile
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
#if defined(VOCALIS_AVX512)
        case 6: dot_tile_pairs<6>(w, K, xr, o); break;
        case 5: dot_tile_pairs<5>(w, K, xr, o); break;
        case 4: dot_tile_pairs<4>(w, K, xr, o); break;
#endif
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

// ---------------------------------------------------------------- prompt passes (GEMM)
//
// Y [M, N] = X [M, K] W^T for many rows (a prompt pass: Pocket TTS's FlowLM over a text's
// tokens), W bfloat16 packed by pack_bf16 (the same tiles the steps read). The dot-product
// form above reads 3 rows and 4 weight vectors per 12 fused multiply-adds, widening each
// weight vector as it goes; here the weights of 16 channels are widened once per block of
// GK values of k into a float32 panel Bp [kc][16] that stays in the L1 cache, and each row
// block of 6 rows runs over it as outer products: per k, two vectors of weights, 6 rows'
// values broadcast, 12 fused multiply-adds (the register blocking of Goto and van de Geijn,
// "Anatomy of high-performance matrix multiplication", ACM TOMS 34(3), 2008; 6 x 16 is the
// 12 accumulators of 8 lanes that 16 vector registers hold with the weights and a broadcast).
// The weights are read from memory once per call and reused by every row.
//
// The sum: y[m, n] = fma(x[m, K-1], w[n, K-1], ... fma(x[m, 1], w[n, 1], x[m, 0] w[n, 0] + 0)),
// one fused multiply-add per k in order k = 0 .. K-1 (the panel blocks only pause the chain:
// the running sums are stored and read back exactly). Another order than the dot-product
// form's, so the two differ by float rounding; each is the same on every instruction set and
// a row's result does not depend on the other rows of the call, on how rows are grouped or on
// the thread count.
constexpr int64_t GN = 16;   // output channels per panel: 4 tiles
constexpr int64_t GM = 6;    // rows per pass over a panel
constexpr int64_t GK = 512;  // k per panel block: 32 KB of float32

inline int64_t panels(int64_t N) { return (N + GN - 1) / GN; }

// Bp [kc][16] = the weights of panel p (channels 16 p .. 16 p + 15) for k in [k0, k0 + kc),
// widened; channels past the last tile are zero. k0 is a multiple of 8; P, Q: pack_bf16's
// tiles and tail for w [N, K].
inline void widen_panel(const uint16_t* P, const uint16_t* Q, int64_t N, int64_t K, int64_t p,
                        int64_t k0, int64_t kc, float* Bp) {
  const int64_t T = tiles(N), K8 = K / 8, rem = K % 8, k1 = k0 + kc;
  const int64_t kb = std::min(k1, K8 * 8);  // full blocks of 8 in [k0, kb)
  // the next panel block (the next k of this panel, else the next panel's first), fetched
  // into the L2 cache while this one is computed: the weights come from memory once per
  // call, and waiting for them cost some 14% at 42 rows (the stream prefetchers do not see
  // far enough ahead across the blocks)
  const int64_t np = k1 < K ? p : p + 1, nk0 = k1 < K ? k1 : 0;
#if defined(VOCALIS_AVX512) && defined(__AVX512BW__)
  // the panel's 4 tiles at once: a block of each (its 4 channels' 8 values of k, 32
  // bfloat16, one 512-bit load) is transposed as bfloat16 by two rounds of two-source word
  // permutes, then widened 16 at a time into whole rows of Bp (a third of the 256-bit path's
  // shuffles, which set this GEMM's cost beside the products at tens of rows)
  alignas(64) static const uint16_t kIdx[4][32] = {
      // round 1, k 0-3 then k 4-7 of a block: [k][8 channels] from tiles (a: 0-3, b: 4-7)
      {0, 8, 16, 24, 32, 40, 48, 56, 1, 9, 17, 25, 33, 41, 49, 57,
       2, 10, 18, 26, 34, 42, 50, 58, 3, 11, 19, 27, 35, 43, 51, 59},
      {4, 12, 20, 28, 36, 44, 52, 60, 5, 13, 21, 29, 37, 45, 53, 61,
       6, 14, 22, 30, 38, 46, 54, 62, 7, 15, 23, 31, 39, 47, 55, 63},
      // round 2, two rows of 16 channels (a: channels 0-7, b: 8-15): k 0-1, then k 2-3
      {0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35, 36, 37, 38, 39,
       8, 9, 10, 11, 12, 13, 14, 15, 40, 41, 42, 43, 44, 45, 46, 47},
      {16, 17, 18, 19, 20, 21, 22, 23, 48, 49, 50, 51, 52, 53, 54, 55,
       24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63}};
  const __m512i lo4 = _mm512_load_si512(kIdx[0]), hi4 = _mm512_load_si512(kIdx[1]);
  const __m512i k01 = _mm512_load_si512(kIdx[2]), k23 = _mm512_load_si512(kIdx[3]);
  const int64_t t0 = p * 4, n0 = np * 4;
  for (int64_t k = k0; k < kb; k += 8) {
    const int64_t nk = k - k0 + nk0;  // the same line of the next block
    __m512i w[4];
    for (int t = 0; t < 4; ++t) {
      if (n0 + t < T && nk < K8 * 8) prefetch_l2(P + ((n0 + t) * K8 + nk / 8) * 32);
      w[t] = t0 + t < T ? _mm512_loadu_si512(P + ((t0 + t) * K8 + k / 8) * 32)
                        : _mm512_setzero_si512();
    }
    const __m512i l0 = _mm512_permutex2var_epi16(w[0], lo4, w[1]);  // channels 0-7, k 0-3
    const __m512i l1 = _mm512_permutex2var_epi16(w[0], hi4, w[1]);  // channels 0-7, k 4-7
    const __m512i h0 = _mm512_permutex2var_epi16(w[2], lo4, w[3]);  // channels 8-15, k 0-3
    const __m512i h1 = _mm512_permutex2var_epi16(w[2], hi4, w[3]);
    const __m512i rows[4] = {_mm512_permutex2var_epi16(l0, k01, h0),   // k 0, 1
                             _mm512_permutex2var_epi16(l0, k23, h0),   // k 2, 3
                             _mm512_permutex2var_epi16(l1, k01, h1),   // k 4, 5
                             _mm512_permutex2var_epi16(l1, k23, h1)};  // k 6, 7
    float* d = Bp + (k - k0) * GN;
    for (int j = 0; j < 4; ++j) {
      const __m256i a = _mm512_castsi512_si256(rows[j]), b = _mm512_extracti64x4_epi64(rows[j], 1);
      _mm512_store_ps(d + (2 * j) * GN,
                      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(a), 16)));
      _mm512_store_ps(d + (2 * j + 1) * GN,
                      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
    }
  }
#else
  for (int64_t half = 0; half < 2; ++half) {  // 8 channels: tiles ta and ta + 1
    const int64_t ta = p * 4 + half * 2, na = np * 4 + half * 2;
    for (int64_t k = k0; k < kb; k += 8) {
      float* d = Bp + (k - k0) * GN + half * 8;
      const int64_t nk = k - k0 + nk0;  // the same line of the next block
      for (int t = 0; t < 2; ++t)
        if (na + t < T && nk < K8 * 8) prefetch_l2(P + ((na + t) * K8 + nk / 8) * 32);
#if defined(VOCALIS_X86)
      __m256 r[8];  // r[c] = channel c's 8 values of k: transposed to 8 rows of 8 channels
      for (int t = 0; t < 2; ++t)
        for (int c = 0; c < 4; ++c)
          r[t * 4 + c] = ta + t < T ? widen8(P + ((ta + t) * K8 + k / 8) * 32 + c * 8)
                                    : _mm256_setzero_ps();
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      _mm256_storeu_ps(d + 0 * GN, _mm256_permute2f128_ps(s0, s4, 0x20));
      _mm256_storeu_ps(d + 1 * GN, _mm256_permute2f128_ps(s1, s5, 0x20));
      _mm256_storeu_ps(d + 2 * GN, _mm256_permute2f128_ps(s2, s6, 0x20));
      _mm256_storeu_ps(d + 3 * GN, _mm256_permute2f128_ps(s3, s7, 0x20));
      _mm256_storeu_ps(d + 4 * GN, _mm256_permute2f128_ps(s0, s4, 0x31));
      _mm256_storeu_ps(d + 5 * GN, _mm256_permute2f128_ps(s1, s5, 0x31));
      _mm256_storeu_ps(d + 6 * GN, _mm256_permute2f128_ps(s2, s6, 0x31));
      _mm256_storeu_ps(d + 7 * GN, _mm256_permute2f128_ps(s3, s7, 0x31));
#else
      for (int t = 0; t < 2; ++t)
        for (int c = 0; c < 4; ++c)
          for (int j = 0; j < 8; ++j)
            d[j * GN + t * 4 + c] =
                ta + t < T ? widen(P[((ta + t) * K8 + k / 8) * 32 + c * 8 + j]) : 0.f;
#endif
    }
  }
#endif
  for (int64_t k = std::max(k0, K8 * 8); k < k1; ++k)  // the last K % 8 values of k
    for (int64_t c = 0; c < GN; ++c) {
      const int64_t t = p * 4 + c / 4;
      Bp[(k - k0) * GN + c] = t < T ? widen(Q[(t * 4 + c % 4) * rem + (k - K8 * 8)]) : 0.f;
    }
}

// C [6][16] (rows ldc apart) = the running sums of 6 rows over a panel block: read back
// (or 0 when first), then one fused multiply-add per k and channel, k in order.
inline void gemm_block(const float* const* a, const float* Bp, int64_t kc, float* C, int64_t ldc,
                       bool first) {
  f32x8 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = zero8();
  } else {
    c00 = load8(C), c01 = load8(C + 8), c10 = load8(C + ldc), c11 = load8(C + ldc + 8);
    c20 = load8(C + 2 * ldc), c21 = load8(C + 2 * ldc + 8);
    c30 = load8(C + 3 * ldc), c31 = load8(C + 3 * ldc + 8);
    c40 = load8(C + 4 * ldc), c41 = load8(C + 4 * ldc + 8);
    c50 = load8(C + 5 * ldc), c51 = load8(C + 5 * ldc + 8);
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (int64_t k = 0; k < kc; ++k) {
    const f32x8 b0 = load8(Bp + k * GN), b1 = load8(Bp + k * GN + 8);
    f32x8 x = bcast8(a0 + k);
    c00 = fma8(x, b0, c00), c01 = fma8(x, b1, c01);
    x = bcast8(a1 + k);
    c10 = fma8(x, b0, c10), c11 = fma8(x, b1, c11);
    x = bcast8(a2 + k);
    c20 = fma8(x, b0, c20), c21 = fma8(x, b1, c21);
    x = bcast8(a3 + k);
    c30 = fma8(x, b0, c30), c31 = fma8(x, b1, c31);
    x = bcast8(a4 + k);
    c40 = fma8(x, b0, c40), c41 = fma8(x, b1, c41);
    x = bcast8(a5 + k);
    c50 = fma8(x, b0, c50), c51 = fma8(x, b1, c51);
  }
  store8(C, c00), store8(C + 8, c01), store8(C + ldc, c10), store8(C + ldc + 8, c11);
  store8(C + 2 * ldc, c20), store8(C + 2 * ldc + 8, c21);
  store8(C + 3 * ldc, c30), store8(C + 3 * ldc + 8, c31);
  store8(C + 4 * ldc, c40), store8(C + 4 * ldc + 8, c41);
  store8(C + 5 * ldc, c50), store8(C + 5 * ldc + 8, c51);
}

// Panels p0 .. p1 - 1 (of panels(N)) of Y [M, N] = X [M, K] W^T, W packed by pack_bf16 (P:
// tiles, Q: tail). The sum of each value is the fused multiply-add chain above.
inline void bf16_gemm(const float* X, const uint16_t* P, const uint16_t* Q, float* Y, int64_t M,
                      int64_t N, int64_t K, int64_t p0, int64_t p1) {
  alignas(64) float Bp[GK * GN];
  float part[GM * GN] = {};  // a partial panel's or row block's running sums
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n0 = p * GN, nr = std::min<int64_t>(GN, N - n0);
    for (int64_t k0 = 0; k0 < K; k0 += GK) {
      const int64_t kc = std::min<int64_t>(GK, K - k0);
      widen_panel(P, Q, N, K, p, k0, kc, Bp);
      for (int64_t m = 0; m < M; m += GM) {
        const int rows = (int)std::min<int64_t>(GM, M - m);
        const float* a[GM];
        for (int r = 0; r < GM; ++r) a[r] = X + (m + std::min(r, rows - 1)) * K + k0;
        if (rows == GM && nr == GN) {
          gemm_block(a, Bp, kc, Y + m * N + n0, N, k0 == 0);
          continue;
        }
        for (int r = 0; r < rows; ++r) std::memcpy(part + r * GN, Y + (m + r) * N + n0, nr * 4);
        gemm_block(a, Bp, kc, part, GN, k0 == 0);
        for (int r = 0; r < rows; ++r) std::memcpy(Y + (m + r) * N + n0, part + r * GN, nr * 4);
      }
    }
  }
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

// t in [-87, 88] -> 2^n (scale) and expm1(r) (pm1), t = n ln2 + r: exp(t) = 2^n (1 + pm1).
inline void exp_parts(float t, float& scale, float& pm1) {
  const float n = std::nearbyint(t * LOG2E);
  float r = std::fma(n, -LN2_HI, t);
  r = std::fma(n, -LN2_LO, r);
  float p = C[6];
  for (int i = 5; i >= 0; --i) p = std::fma(p, r, C[i]);
  pm1 = std::fma(r * r, p, r);
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  std::memcpy(&scale, &bits, 4);
}

#if defined(VOCALIS_X86)
inline void exp_parts(__m256 t, __m256& scale, __m256& pm1) {
  const __m256 nn = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LN2_HI), t);
  r = _mm256_fmadd_ps(nn, _mm256_set1_ps(-LN2_LO), r);
  __m256 p = _mm256_set1_ps(C[6]);
  for (int c = 5; c >= 0; --c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C[c]));
  pm1 = _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r);
  scale = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23));
}
#elif defined(VOCALIS_NEON)
inline void exp_parts(float32x4_t t, float32x4_t& scale, float32x4_t& pm1) {
  const float32x4_t nn = vrndnq_f32(vmulq_f32(t, vdupq_n_f32(LOG2E)));
  float32x4_t r = vfmaq_f32(t, nn, vdupq_n_f32(-LN2_HI));
  r = vfmaq_f32(r, nn, vdupq_n_f32(-LN2_LO));
  float32x4_t p = vdupq_n_f32(C[6]);
  for (int c = 5; c >= 0; --c) p = vfmaq_f32(vdupq_n_f32(C[c]), p, r);
  pm1 = vfmaq_f32(r, vmulq_f32(r, r), p);
  scale = vreinterpretq_f32_s32(
      vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(nn), vdupq_n_s32(127)), 23));
}
#endif

inline float one(float x) {
  if (!(x <= 0.f)) return x;  // x > 0 or NaN
  float scale, pm1;
  exp_parts(std::max(x, LOW), scale, pm1);
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
    __m256 scale, pm1;
    exp_parts(_mm256_max_ps(v, low), scale, pm1);  // NaN lanes: taken from v below
    const __m256 em1 = _mm256_fmadd_ps(scale, pm1, _mm256_sub_ps(scale, _mm256_set1_ps(1.f)));
    const __m256 pos = _mm256_cmp_ps(v, zero, _CMP_NLE_UQ);  // x > 0 or NaN
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(em1, v, pos));
  }
#elif defined(VOCALIS_NEON)
  const float32x4_t zero = vdupq_n_f32(0.f), low = vdupq_n_f32(LOW);
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    // lanes above 0 or NaN: t = 0, their result is x below
    float32x4_t scale, pm1;
    exp_parts(vbslq_f32(vcleq_f32(v, zero), vmaxq_f32(v, low), zero), scale, pm1);
    const float32x4_t em1 = vfmaq_f32(vsubq_f32(scale, vdupq_n_f32(1.f)), scale, pm1);
    vst1q_f32(y + i, vbslq_f32(vcleq_f32(v, zero), em1, v));  // x <= 0: em1; else (NaN too) x
  }
#endif
  for (; i < n; ++i) y[i] = elu_detail::one(x[i]);
}


// ---------------------------------------------------------------- GELU, tanh approximation
//
// gelu(x) = x (1 + tanh(u)) / 2 with u = sqrt(2/pi) (x + 0.044715 x^3) (Hendrycks and Gimpel
// 2016; PyTorch's F.gelu(approximate="tanh")): Pocket TTS's transformers (the FlowLM and Mimi's),
// torch.ops.vocalis_f32.gelu_tanh, the speed choice gelu=vocalis. Since (1 + tanh(u)) / 2 =
// 1 / (1 + exp(-2u)), it is computed as x / (1 + exp(z)) with z = -2u = x (B + A x^2): no
// cancellation where tanh(u) is near -1 (x below about -3, where PyTorch's 1 + tanh(u) keeps
// few bits). exp(z) for z clamped below at -87 (the quotient is then x itself): the reduction
// and polynomial of the ELU above, exp(z) = 2^n (1 + expm1(r)) = 2^n expm1(r) + 2^n, one fused
// multiply-add. Above z = 88 (x below about -10.05, -infinity included) the result is -0: the
// true value is smaller than |x| e^-88 < 2^-123. The division is IEEE's on every instruction
// set, NaN stays NaN (x itself), and every instruction set runs these operations in this
// order: the same bits.
namespace gelu_detail {
constexpr float B = -1.59576912160573071f;     // -2 sqrt(2/pi)
constexpr float A = -0.0713548162726008329f;   // -2 sqrt(2/pi) 0.044715
constexpr float LOW = -87.0f, HIGH = 88.0f;    // 2^n stays a finite normal float32 between

inline float one(float x) {
  using namespace elu_detail;
  if (std::isnan(x)) return x;
  const float s = std::fma(A, x * x, B);
  const float zr = x * s;
  if (zr > HIGH) return -0.f;
  float scale, pm1;
  exp_parts(std::max(zr, LOW), scale, pm1);
  return x / (1.f + std::fma(scale, pm1, scale));
}
}  // namespace gelu_detail

// y[i] = gelu_tanh(x[i]) for i in [0, n).
inline void gelu_tanh(const float* x, float* y, int64_t n) {
  using namespace elu_detail;
  using gelu_detail::A;
  using gelu_detail::B;
  int64_t i = 0;
#if defined(VOCALIS_X86)
  const __m256 low = _mm256_set1_ps(gelu_detail::LOW), high = _mm256_set1_ps(gelu_detail::HIGH);
  const __m256 one = _mm256_set1_ps(1.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 s = _mm256_fmadd_ps(_mm256_set1_ps(A), _mm256_mul_ps(v, v), _mm256_set1_ps(B));
    // NaN lanes become a clamp bound here, their result is x below; lanes above HIGH: -0
    const __m256 zr = _mm256_mul_ps(v, s);
    __m256 scale, pm1;
    exp_parts(_mm256_min_ps(_mm256_max_ps(zr, low), high), scale, pm1);
    __m256 g = _mm256_div_ps(v, _mm256_add_ps(one, _mm256_fmadd_ps(scale, pm1, scale)));
    g = _mm256_blendv_ps(g, _mm256_set1_ps(-0.f), _mm256_cmp_ps(zr, high, _CMP_GT_OQ));
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(g, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
#elif defined(VOCALIS_NEON)
  const float32x4_t low = vdupq_n_f32(gelu_detail::LOW), high = vdupq_n_f32(gelu_detail::HIGH);
  const float32x4_t one = vdupq_n_f32(1.f);
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const uint32x4_t num = vceqq_f32(v, v);  // lanes that are not NaN
    const float32x4_t w = vbslq_f32(num, v, vdupq_n_f32(0.f));  // NaN lanes: x below
    const float32x4_t s = vfmaq_f32(vdupq_n_f32(B), vdupq_n_f32(A), vmulq_f32(w, w));
    const float32x4_t zr = vmulq_f32(w, s);
    float32x4_t scale, pm1;
    exp_parts(vminq_f32(vmaxq_f32(zr, low), high), scale, pm1);
    float32x4_t g = vdivq_f32(w, vaddq_f32(one, vfmaq_f32(scale, scale, pm1)));
    g = vbslq_f32(vcgtq_f32(zr, high), vdupq_n_f32(-0.f), g);
    vst1q_f32(y + i, vbslq_f32(num, g, v));
  }
#endif
  for (; i < n; ++i) y[i] = gelu_detail::one(x[i]);
}

// ---------------------------------------------------------------- SEANet decoder blocks
//
// Pocket TTS's SEANet decoder is a convolution, then per ratio S an upsampling block (ELU, a
// transposed convolution of stride S and kernel 2 S, a residual block), then an ELU and the
// convolution to the waveform (pocket-tts modules/seanet.py: SEANetDecoder,
// SEANetResnetBlock). seanet_block computes one upsampling block, and for the last block the
// final ELU and convolution too (torch.ops.vocalis_f32.seanet_block, the speed choice
// codec_seanet=vocalis). Per row, for u [Ci, n] (n input frames, time contiguous):
//
//   P[c, k, f] = S0(c, k, f),  S0 = sum over ci of w0[ci, c, k] elu(u[ci, f])   (k < 2 S)
//   x[c, f S + j] = (P[c, j, f] + P[c, j + S, f - 1]) + b0[c]    (j < S; for f = 0 the
//                   state s0 [C, S] holds P[c, j + S, -1]: the last call's partial sums)
//   v = elu(x), after the P1 = (K1 - 1) D1 previous values of v (the state s1 [C, P1])
//   h[o, t] = S1(o, t) + b1[o],  S1 = sum over c, then k of w1[o, c, k] v[c, t + k D1 - P1]
//   y[c, t] = x[c, t] + (S2(c, t) + b2[c]),  S2 = sum over o of w2[c, o] elu(h[o, t])
//   and, with an output convolution (O > 0):
//   z = elu(y), after the P3 = K3 - 1 previous values of z (the state s3 [C, P3])
//   out[q, t] = S3(q, t) + b3[q],  S3 = sum over c, then k of w3[q, c, k] z[c, t + k - P3]
//
// The result is y [C, n S], or out [O, n S] with the output convolution. Each sum starts at
// 0 and adds its terms by fused multiply-adds in the order written (ci, c, o ascending, then
// k): every time step is one lane of the same operations, so the results do not depend on
// the instruction set, the vector width, the other rows or the threads. PyTorch sums the
// convolutions in other orders: the two agree to float rounding. The point is the memory:
// the blocks' tensors (up to 64 channels by 1920 samples per row and frame) outgrow the L2
// cache when many rows decode at once, and PyTorch's convolutions, ELUs and sums pass over
// them a dozen times; here each tile of F input frames goes through the whole block while it
// is in the cache, and the products run as register-blocked outer products (4 channels by
// TV vectors of time) near the fused multiply-add peak.
namespace seanet_detail {
constexpr int64_t OB = 4;   // output channels per register block
#if defined(VOCALIS_AVX512)
constexpr int64_t TV = 4;   // 8-lane vectors of time per register block (32 registers)
#else
constexpr int64_t TV = 2;   // (16 registers: AVX2; NEON's 32 hold 16 of these 8-lane pairs)
#endif

// acc[i][j] += a[n * OB + i] * b[n * bstride + 8 j .. + 7] for n in [0, n_), in order: OB
// channels (weights a, interleaved by channel) by V vectors of time.
template <int V>
inline void block(const float* a, const float* b, int64_t n_, int64_t bstride,
                  f32x8 (&acc)[OB][V]) {
  for (int64_t n = 0; n < n_; ++n) {
    f32x8 bv[V];
    for (int j = 0; j < V; ++j) bv[j] = load8(b + n * bstride + 8 * j);
    for (int i = 0; i < OB; ++i) {
      const f32x8 w = bcast8(a + n * OB + i);
      for (int j = 0; j < V; ++j) acc[i][j] = fma8(bv[j], w, acc[i][j]);
    }
  }
}

// y[m, t] for rows m of a [M / OB][n_][OB] and the columns t < width of b [n_][bstride]
// (width a multiple of 8 V): y = sum over n of a[m, n] b[n, t], into y [M][ystride].
template <int V>
inline void product(const float* a, const float* b, int64_t M, int64_t n_, int64_t bstride,
                    int64_t width, float* y, int64_t ystride) {
  for (int64_t mb = 0; mb < M / OB; ++mb)
    for (int64_t t = 0; t < width; t += 8 * V) {
      f32x8 acc[OB][V];
      for (auto& r : acc)
        for (auto& v : r) v = zero8();
      block<V>(a + mb * n_ * OB, b + t, n_, bstride, acc);
      for (int i = 0; i < OB; ++i)
        for (int j = 0; j < V; ++j) store8(y + (mb * OB + i) * ystride + t + 8 * j, acc[i][j]);
    }
}

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
}  // namespace seanet_detail

// One upsampling block's weights, packed by pack_seanet (4 output channels interleaved, read in
// the order of the sums).
struct SeanetBlock {
  int64_t Ci, C, S, H, K1, D1, K3, O;  // O = 0: no output convolution
  const float* w0p;  // [C 2S / 4][Ci][4]: rows c 2S + k of the transposed convolution
  const float* b0;   // [C]
  const float* w1p;  // [H / 4][C K1][4]
  const float* b1;   // [H]
  const float* w2p;  // [C / 4][H][4]
  const float* b2;   // [C]
  const float* w3;   // [O][C][K3] (not packed; unused when O = 0)
  const float* b3;   // [O]
};

// w0 [Ci, C, 2S] -> [C 2S / 4][Ci][4]; w1 [H, C, K1] -> [H / 4][C K1][4]; w2 [C, H] ->
// [C / 4][H][4] (C and H multiples of 4).
inline void pack_seanet(const float* w0, const float* w1, const float* w2, int64_t Ci,
                        int64_t C, int64_t S, int64_t H, int64_t K1, float* w0p, float* w1p,
                        float* w2p) {
  constexpr int64_t OB = seanet_detail::OB;
  const int64_t K0 = 2 * S;
  for (int64_t ci = 0; ci < Ci; ++ci)
    for (int64_t m = 0; m < C * K0; ++m)
      w0p[((m / OB) * Ci + ci) * OB + m % OB] = w0[ci * C * K0 + m];
  for (int64_t o = 0; o < H; ++o)
    for (int64_t ck = 0; ck < C * K1; ++ck)
      w1p[((o / OB) * C * K1 + ck) * OB + o % OB] = w1[o * C * K1 + ck];
  for (int64_t c = 0; c < C; ++c)
    for (int64_t o = 0; o < H; ++o) w2p[((c / OB) * H + o) * OB + c % OB] = w2[c * H + o];
}

// The columns of seanet_products' U and P for B rows of n frames: B n, rounded up to whole
// register blocks (8 TV time steps; 32 serves every build).
inline int64_t seanet_columns(int64_t B, int64_t n) { return seanet_detail::round_up(B * n, 32); }

// Input frames per tile for a row of n frames: 16 or 32 (the transposed convolution's
// vectors of 8 frames by 2 or 4).
inline int64_t seanet_frames(int64_t n) { return n <= 16 ? 16 : 32; }

// The scratch floats seanet_block needs for a row of n input frames.
inline int64_t seanet_floats(const SeanetBlock& L, int64_t n) {
  using namespace seanet_detail;
  const int64_t F = seanet_frames(n), W = round_up(F * L.S, 8 * TV);
  const int64_t P1 = (L.K1 - 1) * L.D1, P3 = L.K3 - 1;
  return L.Ci * F + L.C * 2 * L.S * F + L.C * L.S + L.C * (P1 + W) + L.H * W +
         L.C * (P3 + W) + W;
}

// The transposed convolution's products for the columns of many rows at once (a row of few
// frames reads its weights too seldom to pay for reading them; sharing them across rows
// does): U [Ci][W] (elu(u) of every row's frames side by side, W a multiple of 8 TV) ->
// P [C 2S][W], for the blocks of 4 product rows [mb0, mb1). The same sums as seanet_block's
// own (one fused multiply-add per ci, in order), so the same bits.
inline void seanet_products(const SeanetBlock& L, const float* U, int64_t W, float* P,
                            int64_t mb0, int64_t mb1) {
  using namespace seanet_detail;
  product<TV>(L.w0p + mb0 * L.Ci * OB, U, (mb1 - mb0) * OB, L.Ci, W, W, P + mb0 * OB * W, W);
}

// The threads that compute one row of seanet_block together: member id of size, meeting at
// sync() (a barrier) between the stages that read what the others wrote. Solo: one thread.
struct Solo {
  int id = 0, size = 1;
  void sync() const {}
};

// [lo, hi): member id's share of n items in whole groups of g (n a multiple of g, or the
// last group short).
inline void share(int64_t n, int64_t g, int id, int size, int64_t& lo, int64_t& hi) {
  const int64_t groups = (n + g - 1) / g;
  lo = std::min(n, groups * id / size * g);
  hi = std::min(n, groups * (id + 1) / size * g);
}

// One row: u [Ci, n] and the states s0 [C, S], s1 [C, P1], s3 [C, P3] (read, then replaced by
// the next ones) -> y [C, n S], or out [O, n S] when O > 0 (then y is not written). buf:
// scratch of seanet_floats(L, n) floats. pre: the row's transposed-convolution products
// computed beforehand (seanet_products: [C 2S] rows of stride pstride, this row's n columns
// first), or null to compute them here tile by tile. team: the threads computing this row
// together (every member calls this with the same arguments, buf shared): each stage of a
// tile splits its output channels among them (the output convolution, of few channels, its
// time steps), and they meet between stages; every value is computed by the same operations
// whichever member computes it, so the result is the same bits for any team.
template <class Team = Solo>
inline void seanet_block(const SeanetBlock& L, const float* u, int64_t n, float* s0, float* s1,
                         float* s3, float* out, float* buf, const float* pre = nullptr,
                         int64_t pstride = 0, const Team& team = Team()) {
  using namespace seanet_detail;
  const int64_t Ci = L.Ci, C = L.C, S = L.S, H = L.H, K1 = L.K1, D1 = L.D1, K3 = L.K3, O = L.O;
  const int64_t K0 = 2 * S, T = n * S, F = seanet_frames(n), TT = F * S;
  const int64_t W = round_up(TT, 8 * TV), P1 = (K1 - 1) * D1, P3 = K3 - 1;
  const int64_t WV = P1 + W, WZ = P3 + W;
  float* U = buf;              // [Ci][F]: elu(u) of the tile's frames
  float* P = U + Ci * F;       // [C 2S][F]: the transposed convolution's products
  float* carry = P + C * K0 * F;  // [C][S]: P[c, j + S] of the last frame before the tile
  float* V = carry + C * S;    // [C][P1 + W]: v with its left context
  float* Hb = V + C * WV;      // [H][W]: elu(h)
  float* Z = Hb + H * W;       // [C][P3 + W]: x, then y, then z, with z's left context
  float* q = Z + C * WZ;       // [W]: one output channel of a tile
  int64_t c0, c1, i0, i1, h0, h1, w0, w1;  // this member's channels, inputs, hidden, time
  share(C, OB, team.id, team.size, c0, c1);
  share(Ci, 1, team.id, team.size, i0, i1);
  share(H, OB, team.id, team.size, h0, h1);
  share(W, 8 * TV, team.id, team.size, w0, w1);
  std::memcpy(carry + c0 * S, s0 + c0 * S, (c1 - c0) * S * 4);
  for (int64_t c = c0; c < c1; ++c) {
    std::memcpy(V + c * WV, s1 + c * P1, P1 * 4);
    std::memcpy(Z + c * WZ, s3 + c * P3, P3 * 4);
  }
  int64_t nt = 0;  // the valid time steps of the tile; the rest of its width are zeros
  for (int64_t f0 = 0; f0 < n; f0 += F) {
    const int64_t nf = std::min(F, n - f0), t0 = f0 * S;
    if (f0 > 0)
      for (int64_t c = c0; c < c1; ++c) {  // the left contexts: the last values of the last tile
        std::memmove(V + c * WV, V + c * WV + nt, P1 * 4);
        std::memmove(Z + c * WZ, Z + c * WZ + nt, P3 * 4);
      }
    nt = nf * S;
    const float* PP = P;  // this tile's products, rows of stride ps
    int64_t ps = F;
    if (pre != nullptr) {
      PP = pre + f0;
      ps = pstride;
    } else {
      for (int64_t ci = i0; ci < i1; ++ci) {
        std::memcpy(U + ci * F, u + ci * n + f0, nf * 4);
        std::fill(U + ci * F + nf, U + ci * F + F, 0.f);
        elu(U + ci * F, U + ci * F, F);
      }
      team.sync();  // U whole; each member's products are its own channels' (c K0 + k rows)
      if (F % (8 * TV) == 0)
        product<TV>(L.w0p + c0 * K0 * Ci, U, (c1 - c0) * K0, Ci, F, F, P + c0 * K0 * F, F);
      else
        product<2>(L.w0p + c0 * K0 * Ci, U, (c1 - c0) * K0, Ci, F, F, P + c0 * K0 * F, F);
    }
    for (int64_t c = c0; c < c1; ++c) {  // overlap-add: x, into Z's columns
      float* z = Z + c * WZ + P3;
      const float* p = PP + c * K0 * ps;
      for (int64_t j = 0; j < S; ++j)
        z[j] = (p[j * ps] + carry[c * S + j]) + L.b0[c];
      for (int64_t f = 1; f < nf; ++f)
        for (int64_t j = 0; j < S; ++j)
          z[f * S + j] = (p[j * ps + f] + p[(j + S) * ps + f - 1]) + L.b0[c];
      for (int64_t j = 0; j < S; ++j) carry[c * S + j] = p[(j + S) * ps + nf - 1];
      std::fill(z + nt, z + W, 0.f);
      elu(z, V + c * WV + P1, W);
    }
    team.sync();  // V whole
    for (int64_t ob = h0 / OB; ob < h1 / OB; ++ob)  // h, then elu(h)
      for (int64_t t = 0; t < W; t += 8 * TV) {
        f32x8 acc[OB][TV];
        for (auto& r : acc)
          for (auto& v : r) v = zero8();
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < K1; ++k)
            block<TV>(L.w1p + ((ob * C + c) * K1 + k) * OB, V + c * WV + k * D1 + t, 1, 0, acc);
        for (int i = 0; i < OB; ++i) {
          const f32x8 b = bcast8(L.b1 + ob * OB + i);
          for (int j = 0; j < TV; ++j) store8(Hb + (ob * OB + i) * W + t + 8 * j, add8(acc[i][j], b));
        }
      }
    elu(Hb + h0 * W, Hb + h0 * W, (h1 - h0) * W);
    team.sync();  // Hb whole
    for (int64_t cb = c0 / OB; cb < c1 / OB; ++cb)  // y = x + conv1x1(elu(h))
      for (int64_t t = 0; t < W; t += 8 * TV) {
        f32x8 acc[OB][TV];
        for (auto& r : acc)
          for (auto& v : r) v = zero8();
        block<TV>(L.w2p + cb * H * OB, Hb + t, H, W, acc);
        for (int i = 0; i < OB; ++i) {
          const f32x8 b = bcast8(L.b2 + cb * OB + i);
          float* z = Z + (cb * OB + i) * WZ + P3 + t;
          for (int j = 0; j < TV; ++j) store8(z + 8 * j, add8(load8(z + 8 * j), add8(acc[i][j], b)));
        }
      }
    if (O == 0) {  // the block's output: y
      for (int64_t c = c0; c < c1; ++c) std::memcpy(out + c * T + t0, Z + c * WZ + P3, nt * 4);
      continue;
    }
    for (int64_t c = c0; c < c1; ++c) {  // z = elu(y) (past nt: values no valid step reads)
      float* z = Z + c * WZ + P3;
      elu(z, z, W);
    }
    team.sync();  // Z whole
    for (int64_t o = 0; o < O; ++o) {  // out = conv(z), the members taking time steps
      for (int64_t t = w0; t < w1; t += 8 * TV) {
        f32x8 acc[TV];
        for (auto& v : acc) v = zero8();
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < K3; ++k) {
            const f32x8 w = bcast8(L.w3 + (o * C + c) * K3 + k);
            const float* z = Z + c * WZ + k + t;
            for (int j = 0; j < TV; ++j) acc[j] = fma8(load8(z + 8 * j), w, acc[j]);
          }
        const f32x8 b = bcast8(L.b3 + o);
        for (int j = 0; j < TV; ++j) store8(q + t + 8 * j, add8(acc[j], b));
      }
      if (std::min(w1, nt) > w0) std::memcpy(out + o * T + t0 + w0, q + w0, (std::min(w1, nt) - w0) * 4);
    }
    team.sync();  // Z read: the next tile may write it
  }
  std::memcpy(s0 + c0 * S, carry + c0 * S, (c1 - c0) * S * 4);  // the next states: the last
  if (n > 0)                                                      // values before the padding
    for (int64_t c = c0; c < c1; ++c) {
      std::memcpy(s1 + c * P1, V + c * WV + nt, P1 * 4);
      if (O > 0) std::memcpy(s3 + c * P3, Z + c * WZ + nt, P3 * 4);
    }
}

}  // namespace f32_core
