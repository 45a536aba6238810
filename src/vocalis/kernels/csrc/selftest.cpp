// vocalis: the kernels' arithmetic checked without PyTorch, on any instruction set.
//
// Built from the same cores as the torch ops (f32_core.h, q8_core.h, q4_core.h), with the flags
// of a build variant (vocalis/kernels/cpu.py): natively on x86 (AVX2, AVX-512 VNNI, or
// -DVOCALIS_FORCE_SCALAR), or cross-compiled for AArch64 (NEON, NEON + dot product) and run
// under qemu. tests/families/test_kernels_arm.py writes the cases, with the outputs of the torch
// ops of the machine that wrote them and, for float32, the float64 product and its error bound:
//
//   selftest CASES    runs every case; prints one line per case and a verdict; exit 0 when
//                     every check held, 1 when one failed, 2 for a file it cannot read
//   selftest --isa    prints the instruction set each kernel was compiled for
//
// Checks: int8 and int4 products (and their packed weights) equal the reference bit for bit;
// float32 products (float32 and bfloat16-held weights) equal it bit for bit too (one summation
// order on every instruction set: simd.h) and stay within the float32 dot-product error bound
// of the float64 product; on the same build, every row alone equals it in the batch, the
// bfloat16-held weights give their float32 values' results, and a product split into blocks of
// tiles (as threads split it) equals it in one block. ELU and GELU (check_activation): the
// vector lanes equal the scalar code, within their bounds of the float64 formulas (ELU: 2
// float32 roundings of expm1), and the reference bit for bit.
// The prompt passes' GEMM (check_gemm): its sum written out with std::fma, bit for bit.
// The SEANet decoder's blocks (check_seanet): the reference bit for bit, row by row, in two
// calls, with the rows' products computed together, and each row shared by teams of 2 and 3
// threads (std::thread: the build links -pthread).
//
// The file (little-endian): "VOCKT001", u32 cases, then per case u32 kind (1 float32, 2 bfloat16
// weights, 3 int8, 4 int4, 5 ELU, 6 bfloat16 GEMM, 7 GELU), u32 name length, the name, i64 M, N,
// K, f32 x [M, K], the weights
// [N, K] (f32; for kind 2 u16 bfloat16 bits), for kind 3 the expected pack (i8 tiles
// [ceil(N/4), 4 Kp], f32 scales [N], i32 sums [N]), for kind 4 (u8 packed [N, Kp/2], f32 scales
// [N, Kp/32]), f32 y [M, N], and for kinds 1 and 2 f64 exact [M, N] and f64 bound [M, N]. Kind 5
// (N = K = 1) has no weights: f32 x [M], f32 y [M], f64 expm1 or x [M], f64 bound [M]. Kind 6
// (the bfloat16 GEMM) is laid out as kind 2, kind 7 (GELU) as kind 5. Kind 8 (a SEANet block:
// M rows, N input frames, K = Ci N) as check_seanet says.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "f32_core.h"
#include "q4_core.h"
#include "q8_core.h"

namespace {

struct Reader {
  FILE* f;
  bool ok = true;
  template <typename T>
  std::vector<T> read(int64_t n) {
    std::vector<T> v(n > 0 ? n : 0);
    if (n > 0 && std::fread(v.data(), sizeof(T), n, f) != size_t(n)) ok = false;
    return v;
  }
  template <typename T>
  T one() {
    T v{};
    if (std::fread(&v, sizeof v, 1, f) != 1) ok = false;
    return v;
  }
};

// Bit-for-bit equality of two arrays; else a message naming the first difference.
template <typename T>
bool same(const std::vector<T>& got, const std::vector<T>& want, const char* what,
          std::string& why) {
  if (got.size() == want.size() && (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0))
    return true;
  if (got.size() != want.size()) {
    why = std::string(what) + ": " + std::to_string(got.size()) + " values, expected " +
          std::to_string(want.size());
    return false;
  }
  size_t i = 0;
  while (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) ++i;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s differs at %zu: %.9g, expected %.9g", what, i, double(got[i]),
                double(want[i]));
  why = buf;
  return false;
}

// |y - exact| <= bound everywhere; else a message naming the first value outside.
bool within(const std::vector<float>& y, const std::vector<double>& exact,
            const std::vector<double>& bound, std::string& why) {
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::fabs(double(y[i]) - exact[i]) <= bound[i])) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "value %zu: %.9g is %.3g from the float64 product, bound %.3g",
                    i, double(y[i]), std::fabs(double(y[i]) - exact[i]), bound[i]);
      why = buf;
      return false;
    }
  return true;
}

// Rows of y [M, N] computed one row at a time by f(row x, row y).
template <typename F>
std::vector<float> rows_alone(const std::vector<float>& x, int64_t M, int64_t N, int64_t K, F f) {
  std::vector<float> y(M * N);
  for (int64_t m = 0; m < M; ++m) f(x.data() + m * K, y.data() + m * N);
  return y;
}

// ---------------------------------------------------------------- float32

std::vector<float> f32_run(const float* X, const float* W, int64_t M, int64_t N, int64_t K,
                           bool split) {
  std::vector<float> y(M * N);
  const int64_t T = f32_core::tiles(N), h = split ? T / 2 : T;
  f32_core::linear(X, W, y.data(), M, N, K, 0, h);
  f32_core::linear(X, W, y.data(), M, N, K, h, T);
  return y;
}

// y [M, N] by f (f32_core::bf16_linear over tiles, or bf16_gemm over panels: blocks of
// them), on pack_bf16's tl and tt; split: in two calls, as two threads split it.
template <class F>
std::vector<float> bf16_split(F f, int64_t blocks, const float* X, const std::vector<uint16_t>& tl,
                              const std::vector<uint16_t>& tt, int64_t M, int64_t N, int64_t K,
                              bool split) {
  std::vector<float> y(M * N);
  const int64_t h = split ? blocks / 2 : blocks;
  f(X, tl.data(), tt.data(), y.data(), M, N, K, 0, h);
  f(X, tl.data(), tt.data(), y.data(), M, N, K, h, blocks);
  return y;
}

std::vector<float> bf16_run(const float* X, const std::vector<uint16_t>& tl,
                            const std::vector<uint16_t>& tt, int64_t M, int64_t N, int64_t K,
                            bool split) {
  return bf16_split(f32_core::bf16_linear, f32_core::tiles(N), X, tl, tt, M, N, K, split);
}

bool check_float(int kind, Reader& in, int64_t M, int64_t N, int64_t K, std::string& why) {
  auto x = in.read<float>(M * K);
  std::vector<float> w;
  std::vector<uint16_t> wb;
  if (kind == 1) {
    w = in.read<float>(N * K);
  } else {
    wb = in.read<uint16_t>(N * K);
    w.resize(N * K);
    for (int64_t i = 0; i < N * K; ++i) w[i] = vocalis_simd::widen(wb[i]);
  }
  auto ref = in.read<float>(M * N);
  auto exact = in.read<double>(M * N);
  auto bound = in.read<double>(M * N);
  if (!in.ok) return false;
  std::vector<float> y = f32_run(x.data(), w.data(), M, N, K, false);
  std::vector<float> alone = rows_alone(x, M, N, K, [&](const float* xr, float* yr) {
    auto r = f32_run(xr, w.data(), 1, N, K, false);
    std::memcpy(yr, r.data(), N * sizeof(float));
  });
  if (!same(alone, y, "a row alone vs in the batch", why)) return false;
  if (!same(f32_run(x.data(), w.data(), M, N, K, true), y, "split in blocks of tiles", why)) return false;
  if (kind == 2) {
    std::vector<uint16_t> tl(f32_core::bf16_tiles_size(N, K)), tt(f32_core::bf16_tail_size(N, K));
    f32_core::pack_bf16(wb.data(), N, K, tl.data(), tt.data());
    auto yb = bf16_run(x.data(), tl, tt, M, N, K, false);
    if (!same(yb, y, "bfloat16-held weights vs their float32 values", why)) return false;
    if (!same(bf16_run(x.data(), tl, tt, M, N, K, true), y, "bfloat16 split in blocks", why)) return false;
  }
  if (!within(y, exact, bound, why)) return false;
  return same(y, ref, "the reference's outputs", why);
}

// ---------------------------------------------------------------- bfloat16 GEMM (prompt passes)

std::vector<float> gemm_run(const float* X, const std::vector<uint16_t>& tl,
                            const std::vector<uint16_t>& tt, int64_t M, int64_t N, int64_t K,
                            bool split) {
  return bf16_split(f32_core::bf16_gemm, f32_core::panels(N), X, tl, tt, M, N, K, split);
}

// Kind 6: f32_core::bf16_gemm equals its sum written out (one std::fma per k, in order, from
// 0) bit for bit, every row alone equals it in the batch, a split into blocks of panels (as
// threads split it) equals it in one block; within the float32 bound of the float64 product;
// the reference's outputs bit for bit.
bool check_gemm(Reader& in, int64_t M, int64_t N, int64_t K, std::string& why) {
  auto x = in.read<float>(M * K);
  auto wb = in.read<uint16_t>(N * K);
  auto ref = in.read<float>(M * N);
  auto exact = in.read<double>(M * N);
  auto bound = in.read<double>(M * N);
  if (!in.ok) return false;
  std::vector<uint16_t> tl(f32_core::bf16_tiles_size(N, K)), tt(f32_core::bf16_tail_size(N, K));
  f32_core::pack_bf16(wb.data(), N, K, tl.data(), tt.data());
  std::vector<float> y = gemm_run(x.data(), tl, tt, M, N, K, false);
  std::vector<float> chain(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float s = 0.f;
      for (int64_t k = 0; k < K; ++k) s = std::fma(x[m * K + k], vocalis_simd::widen(wb[n * K + k]), s);
      chain[m * N + n] = s;
    }
  if (!same(y, chain, "the GEMM vs its sum written out", why)) return false;
  std::vector<float> alone = rows_alone(x, M, N, K, [&](const float* xr, float* yr) {
    auto r = gemm_run(xr, tl, tt, 1, N, K, false);
    std::memcpy(yr, r.data(), N * sizeof(float));
  });
  if (!same(alone, y, "a row alone vs in the batch", why)) return false;
  if (!same(gemm_run(x.data(), tl, tt, M, N, K, true), y, "split in blocks of panels", why)) return false;
  if (!within(y, exact, bound, why)) return false;
  return same(y, ref, "the reference's outputs", why);
}

// ---------------------------------------------------------------- ELU and GELU

// M values x: the activation `f` (in two blocks, as threads split it) equals its scalar form
// `one` value by value (the vector lanes against the portable code of this build), stays within
// the bound of the float64 formula (NaN stays NaN), and equals the reference's outputs bit for
// bit. ELU: f32_core::elu (2 float32 roundings of expm1); GELU: f32_core::gelu_tanh.
bool check_activation(Reader& in, int64_t M, std::string& why, const char* name,
                      void (*f)(const float*, float*, int64_t), float (*one_of)(float)) {
  auto x = in.read<float>(M);
  auto ref = in.read<float>(M);
  auto exact = in.read<double>(M);
  auto bound = in.read<double>(M);
  if (!in.ok) return false;
  std::vector<float> y(M), one(M);
  f(x.data(), y.data(), M / 2);
  f(x.data() + M / 2, y.data() + M / 2, M - M / 2);
  for (int64_t i = 0; i < M; ++i) one[i] = one_of(x[i]);
  if (!same(y, one, "the vector lanes vs the scalar code", why)) return false;
  for (int64_t i = 0; i < M; ++i) {
    const bool nan = std::isnan(exact[i]);
    const bool close = double(y[i]) == exact[i] || std::fabs(double(y[i]) - exact[i]) <= bound[i];
    if (nan ? !std::isnan(y[i]) : !close) {  // == for the infinities
      char buf[200];
      std::snprintf(buf, sizeof buf, "value %lld: %s(%.9g) = %.9g, float64 %.9g, bound %.3g",
                    (long long)i, name, double(x[i]), double(y[i]), exact[i], bound[i]);
      why = buf;
      return false;
    }
  }
  return same(y, ref, "the reference's outputs", why);
}

// ---------------------------------------------------------------- SEANet blocks

// A team of std::threads for f32_core::seanet_block: they meet at a spinning barrier.
struct Barrier {
  std::atomic<int> waiting{0}, round{0};
  int size;
  explicit Barrier(int n) : size(n) {}
  void wait() {
    const int r = round.load();
    if (waiting.fetch_add(1) + 1 == size) {
      waiting.store(0);
      round.fetch_add(1);
    } else {
      while (round.load() == r) std::this_thread::yield();
    }
  }
};

struct ThreadTeam {
  int id, size;
  Barrier* barrier;
  void sync() const { barrier->wait(); }
};

// One SEANet upsampling block (f32_core::seanet_block) for B = M rows of N input frames: the
// case's x, u [B, Ci, N] (K = Ci N), then the dims Ci, C, S, H, K1, D1, K3, O (i64), w0 [Ci,
// C, 2S], b0 [C], w1 [H, C, K1], b1 [H], w2 [C, H], b2 [C], w3 [O, C, K3], b3 [O], the
// states s0 [B, C, S], s1 [B, C, P1], s3 [B, C, P3], then the reference's outputs (out [B, O
// or C, N S], s0, s1, s3). Checks: each row alone, in two calls of N / 2 and N - N / 2 frames
// (the states carry exactly), and all rows with their products computed together
// (seanet_products, in two blocks as threads split them) give the reference's bits, and so
// does each row shared by a team of 2 and of 3 threads (ThreadTeam).
bool check_seanet(Reader& in, int64_t B, int64_t n, int64_t K, std::string& why) {
  auto u = in.read<float>(B * K);
  auto d = in.read<int64_t>(8);
  if (!in.ok) return false;
  const int64_t Ci = d[0], C = d[1], S = d[2], H = d[3], K1 = d[4], D1 = d[5], K3 = d[6], O = d[7];
  if (Ci < 1 || C < 4 || C % 4 || H < 4 || H % 4 || S < 1 || K1 < 1 || D1 < 1 || K3 < 1 ||
      O < 0 || K != Ci * n || C * S * n > (1 << 24)) {
    in.ok = false;
    return false;
  }
  const int64_t P1 = (K1 - 1) * D1, P3 = K3 - 1, outc = O > 0 ? O : C;
  auto w0 = in.read<float>(Ci * C * 2 * S);
  auto b0 = in.read<float>(C);
  auto w1 = in.read<float>(H * C * K1);
  auto b1 = in.read<float>(H);
  auto w2 = in.read<float>(C * H);
  auto b2 = in.read<float>(C);
  auto w3 = in.read<float>(O * C * K3);
  auto b3 = in.read<float>(O);
  auto s0 = in.read<float>(B * C * S);
  auto s1 = in.read<float>(B * C * P1);
  auto s3 = in.read<float>(B * C * P3);
  auto ref = in.read<float>(B * outc * n * S);
  auto r0 = in.read<float>(B * C * S);
  auto r1 = in.read<float>(B * C * P1);
  auto r3 = in.read<float>(B * C * P3);
  if (!in.ok) return false;
  std::vector<float> w0p(w0.size()), w1p(w1.size()), w2p(w2.size());
  f32_core::pack_seanet(w0.data(), w1.data(), w2.data(), Ci, C, S, H, K1, w0p.data(), w1p.data(),
                        w2p.data());
  const f32_core::SeanetBlock L{Ci, C, S, H, K1, D1, K3, O, w0p.data(), b0.data(), w1p.data(),
                                b1.data(), w2p.data(), b2.data(), w3.data(), b3.data()};
  // rows alone, the frames in one call, then in two
  for (int calls = 1; calls <= 2; ++calls) {
    auto a0 = s0, a1 = s1, a3 = s3;
    std::vector<float> out(B * outc * n * S);
    for (int64_t r = 0; r < B; ++r) {
      const int64_t parts[2] = {calls == 1 ? n : n / 2, calls == 1 ? 0 : n - n / 2};
      int64_t f0 = 0;
      for (int64_t nf : parts) {
        if (nf == 0) continue;
        std::vector<float> ur(Ci * nf), o(outc * nf * S), buf(f32_core::seanet_floats(L, nf));
        for (int64_t ci = 0; ci < Ci; ++ci)
          std::memcpy(&ur[ci * nf], &u[(r * Ci + ci) * n + f0], nf * 4);
        f32_core::seanet_block(L, ur.data(), nf, &a0[r * C * S], &a1[r * C * P1], &a3[r * C * P3],
                               o.data(), buf.data());
        for (int64_t c = 0; c < outc; ++c)
          std::memcpy(&out[(r * outc + c) * n * S + f0 * S], &o[c * nf * S], nf * S * 4);
        f0 += nf;
      }
    }
    const char* what = calls == 1 ? "rows alone" : "rows alone in two calls";
    if (!same(out, ref, what, why) || !same(a0, r0, "the next s0", why) ||
        !same(a1, r1, "the next s1", why) || !same(a3, r3, "the next s3", why)) {
      why = std::string(what) + ": " + why;
      return false;
    }
  }
  // each row shared by a team of threads, its frames in one call
  for (int size = 2; size <= 3; ++size) {
    auto a0 = s0, a1 = s1, a3 = s3;
    std::vector<float> out(B * outc * n * S), buf(f32_core::seanet_floats(L, n));
    for (int64_t r = 0; r < B; ++r) {
      Barrier barrier(size);
      std::vector<std::thread> team;
      for (int id = 0; id < size; ++id)
        team.emplace_back([&, id] {
          f32_core::seanet_block(L, &u[r * Ci * n], n, &a0[r * C * S], &a1[r * C * P1],
                                 &a3[r * C * P3], &out[r * outc * n * S], buf.data(), nullptr, 0,
                                 ThreadTeam{id, size, &barrier});
        });
      for (auto& t : team) t.join();
    }
    const std::string what = "rows shared by " + std::to_string(size) + " threads";
    if (!same(out, ref, what.c_str(), why) || !same(a0, r0, "the next s0", why) ||
        !same(a1, r1, "the next s1", why) || !same(a3, r3, "the next s3", why)) {
      if (why.rfind(what, 0) != 0) why = what + ": " + why;  // (the states' lines)
      return false;
    }
  }
  // all rows, their products computed together first
  const int64_t W = f32_core::seanet_columns(B, n), M4 = C * 2 * S / 4;
  std::vector<float> U(Ci * W, 0.f), P(C * 2 * S * W), out(B * outc * n * S);
  for (int64_t r = 0; r < B; ++r)
    for (int64_t ci = 0; ci < Ci; ++ci) f32_core::elu(&u[(r * Ci + ci) * n], &U[ci * W + r * n], n);
  f32_core::seanet_products(L, U.data(), W, P.data(), 0, M4 / 2);
  f32_core::seanet_products(L, U.data(), W, P.data(), M4 / 2, M4);
  auto a0 = s0, a1 = s1, a3 = s3;
  std::vector<float> buf(f32_core::seanet_floats(L, n));
  for (int64_t r = 0; r < B; ++r)
    f32_core::seanet_block(L, &u[r * Ci * n], n, &a0[r * C * S], &a1[r * C * P1], &a3[r * C * P3],
                           &out[r * outc * n * S], buf.data(), P.data() + r * n, W);
  if (!same(out, ref, "rows together", why) || !same(a0, r0, "the next s0 (together)", why))
    return false;
  return same(a1, r1, "the next s1 (together)", why) && same(a3, r3, "the next s3 (together)", why);
}

// ---------------------------------------------------------------- int8

std::vector<float> q8_run(const float* X, const std::vector<int8_t>& P, const std::vector<float>& S,
                          const std::vector<int32_t>& Z, int64_t M, int64_t N, int64_t K,
                          bool split) {
  const int64_t Kp = q8_core::padded(K), T = q8_core::tiles(N), h = split ? T / 2 : T;
  std::vector<uint8_t> A(std::max<int64_t>(M, 1) * Kp);
  std::vector<float> SX(M), y(M * N);
  for (int64_t m = 0; m < M; ++m) SX[m] = q8_core::quantize_row(X + m * K, K, Kp, A.data() + m * Kp);
  q8_core::linear(A.data(), SX.data(), P.data(), S.data(), Z.data(), y.data(), M, N, Kp, 0, h);
  q8_core::linear(A.data(), SX.data(), P.data(), S.data(), Z.data(), y.data(), M, N, Kp, h, T);
  return y;
}

bool check_q8(Reader& in, int64_t M, int64_t N, int64_t K, std::string& why) {
  const int64_t Kp = q8_core::padded(K), T = q8_core::tiles(N);
  auto x = in.read<float>(M * K);
  auto w = in.read<float>(N * K);
  auto ref_p = in.read<int8_t>(T * q8_core::R * Kp);
  auto ref_s = in.read<float>(N);
  auto ref_z = in.read<int32_t>(N);
  auto ref = in.read<float>(M * N);
  if (!in.ok) return false;
  std::vector<int8_t> P(T * q8_core::R * Kp, 0);
  std::vector<float> S(N);
  std::vector<int32_t> Z(N);
  q8_core::pack(w.data(), K, P.data(), S.data(), Z.data(), 0, N / 2);  // in two blocks, as threads
  q8_core::pack(w.data(), K, P.data(), S.data(), Z.data(), N / 2, N);
  if (!same(P, ref_p, "packed int8 weights", why) || !same(S, ref_s, "weight scales", why) ||
      !same(Z, ref_z, "weight sums", why))
    return false;
  auto y = q8_run(x.data(), P, S, Z, M, N, K, false);
  auto alone = rows_alone(x, M, N, K, [&](const float* xr, float* yr) {
    auto r = q8_run(xr, P, S, Z, 1, N, K, false);
    std::memcpy(yr, r.data(), N * sizeof(float));
  });
  if (!same(alone, y, "a row alone vs in the batch", why)) return false;
  if (!same(q8_run(x.data(), P, S, Z, M, N, K, true), y, "split in blocks of tiles", why)) return false;
  return same(y, ref, "the reference's outputs", why);
}

// ---------------------------------------------------------------- int4

// As the torch op: one row through linear_row, several through linear_rows (tiles of NT
// channels unpacked once), or (force_rows) several through linear_rows even for one row.
std::vector<float> q4_run(const float* X, const std::vector<uint8_t>& P, const std::vector<float>& S,
                          int64_t M, int64_t N, int64_t K, bool split, bool force_rows = false) {
  const int64_t Kp = q4_core::padded(K), B = Kp / 32;
  std::vector<int8_t> Q(M * Kp);
  std::vector<float> D(M * B), y(M * N);
  std::vector<int32_t> C(M * B);
  q4_core::quantize_rows(X, M, K, Kp, Q.data(), D.data(), C.data());
  if (M == 1 && !force_rows) {
    const int64_t h = split ? N / 2 : N;
    q4_core::linear_row(P.data(), S.data(), Q.data(), D.data(), C.data(), y.data(), Kp, 0, h);
    q4_core::linear_row(P.data(), S.data(), Q.data(), D.data(), C.data(), y.data(), Kp, h, N);
  } else {
    const int64_t T = (N + q4_core::NT - 1) / q4_core::NT, h = split ? T / 2 : T;
    q4_core::linear_rows(P.data(), S.data(), Q.data(), D.data(), C.data(), y.data(), M, N, Kp, 0, h);
    q4_core::linear_rows(P.data(), S.data(), Q.data(), D.data(), C.data(), y.data(), M, N, Kp, h, T);
  }
  return y;
}

bool check_q4(Reader& in, int64_t M, int64_t N, int64_t K, std::string& why) {
  const int64_t Kp = q4_core::padded(K), B = Kp / 32;
  auto x = in.read<float>(M * K);
  auto w = in.read<float>(N * K);
  auto ref_p = in.read<uint8_t>(N * Kp / 2);
  auto ref_s = in.read<float>(N * B);
  auto ref = in.read<float>(M * N);
  if (!in.ok) return false;
  std::vector<uint8_t> P(N * Kp / 2);
  std::vector<float> S(N * B);
  q4_core::pack(w.data(), K, P.data(), S.data(), 0, N / 2);
  q4_core::pack(w.data(), K, P.data(), S.data(), N / 2, N);
  if (!same(P, ref_p, "packed int4 weights", why) || !same(S, ref_s, "weight scales", why))
    return false;
  auto y = q4_run(x.data(), P, S, M, N, K, false);
  auto alone = rows_alone(x, M, N, K, [&](const float* xr, float* yr) {
    auto r = q4_run(xr, P, S, 1, N, K, false);
    std::memcpy(yr, r.data(), N * sizeof(float));
  });
  if (!same(alone, y, "a row alone (one-row path) vs in the batch", why)) return false;
  auto rows = rows_alone(x, M, N, K, [&](const float* xr, float* yr) {
    auto r = q4_run(xr, P, S, 1, N, K, false, true);
    std::memcpy(yr, r.data(), N * sizeof(float));
  });
  if (!same(rows, y, "a row alone (several-row path) vs in the batch", why)) return false;
  if (!same(q4_run(x.data(), P, S, M, N, K, true), y, "split in blocks", why)) return false;
  return same(y, ref, "the reference's outputs", why);
}

void print_isa() {
  std::printf("isa float32=%s int8=%s int4=%s\n", f32_core::isa(), q8_core::isa(), q4_core::isa());
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as it is printed, even if a case crashes
  if (argc == 2 && std::strcmp(argv[1], "--isa") == 0) {
    print_isa();
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: selftest CASES | selftest --isa\n");
    return 2;
  }
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) {
    std::fprintf(stderr, "selftest: cannot open %s\n", argv[1]);
    return 2;
  }
  Reader in{f};
  char magic[8];
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "VOCKT001", 8) != 0) {
    std::fprintf(stderr, "selftest: %s is not a cases file (VOCKT001)\n", argv[1]);
    return 2;
  }
  print_isa();
  const uint32_t cases = in.one<uint32_t>();
  int failed = 0;
  for (uint32_t i = 0; i < cases && in.ok; ++i) {
    const uint32_t kind = in.one<uint32_t>();
    const uint32_t len = in.one<uint32_t>();
    std::string name(len, '?');
    if (len && std::fread(&name[0], 1, len, f) != len) in.ok = false;
    const int64_t M = in.one<int64_t>(), N = in.one<int64_t>(), K = in.one<int64_t>();
    if (!in.ok || M < 1 || N < 1 || K < 1 || M * K > (1 << 26) || N * K > (1 << 26)) {
      in.ok = false;
      break;
    }
    std::string why;
    bool ok = false;
    switch (kind) {
      case 1:
      case 2: ok = check_float(int(kind), in, M, N, K, why); break;
      case 3: ok = check_q8(in, M, N, K, why); break;
      case 4: ok = check_q4(in, M, N, K, why); break;
      case 5:
        ok = check_activation(in, M, why, "elu", f32_core::elu, f32_core::elu_detail::one);
        break;
      case 6: ok = check_gemm(in, M, N, K, why); break;
      case 7:
        ok = check_activation(in, M, why, "gelu", f32_core::gelu_tanh, f32_core::gelu_detail::one);
        break;
      case 8: ok = check_seanet(in, M, N, K, why); break;
      default: in.ok = false;
    }
    if (!in.ok) break;
    std::printf("%s %s (M=%lld N=%lld K=%lld)%s%s\n", ok ? "ok  " : "FAIL", name.c_str(),
                (long long)M, (long long)N, (long long)K, ok ? "" : ": ", why.c_str());
    failed += !ok;
  }
  std::fclose(f);
  if (!in.ok) {
    std::fprintf(stderr, "selftest: %s is truncated or malformed\n", argv[1]);
    return 2;
  }
  std::printf("%s: %u cases, %d failed\n", failed ? "FAILED" : "PASSED", cases, failed);
  return failed ? 1 : 0;
}
