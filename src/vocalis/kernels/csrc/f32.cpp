// vocalis: float32 linear as torch.ops.vocalis_f32 (Qwen3-TTS model_linears="vocalis", Pocket
// TTS flow_linears="vocalis", whose prompt passes run bf16_gemm, and codec_linears="vocalis"),
// ELU (Pocket TTS codec_elu="vocalis"), GELU (Pocket TTS gelu="vocalis") and the SEANet
// decoder's upsampling blocks (Pocket TTS codec_seanet="vocalis"): the PyTorch side
// (shapes, checks, outputs, threads) of the arithmetic
// in f32_core.h, which says how it sums (one order on every instruction set).
// The point of the kernel is lend.h: while the engine's codec thread waits, its core takes
// blocks of the output channels (two cores read memory faster than one; figures in
// docs/speed-choices.md, "Engine threads").
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cstdint>
#include <optional>
#include <vector>

#include "f32_core.h"
#include "lend.h"

namespace {

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
  const float* X = xs.data_ptr<float>();
  const float* W = w.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  vocalis_lend::parallel_for(f32_core::tiles(N), 8, [&](int64_t t0, int64_t t1) {
    f32_core::linear(X, W, Y, M, N, K, t0, t1);
  });
  return y;
}

// w [N, K] bfloat16 -> (tiles [ceil(N / 4), K / 8, 4, 8], tail [ceil(N / 4), 4, K % 8]), both
// bfloat16: the layout f32_core::BF16Tile reads; a last partial tile repeats its last channel.
std::tuple<torch::Tensor, torch::Tensor> pack_bf16(torch::Tensor w) {
  TORCH_CHECK(w.scalar_type() == torch::kBFloat16 && w.dim() == 2,
              "pack_bf16: w must be bfloat16 [N, K]");
  auto wc = w.contiguous();
  const int64_t N = wc.size(0), K = wc.size(1), T = f32_core::tiles(N);
  constexpr int64_t R = f32_core::R;
  auto tiles = torch::empty({T, K / 8, R, 8}, torch::kBFloat16);
  auto tail = torch::empty({T, R, K % 8}, torch::kBFloat16);
  if (N > 0)
    f32_core::pack_bf16(reinterpret_cast<const uint16_t*>(wc.data_ptr<at::BFloat16>()), N, K,
                        reinterpret_cast<uint16_t*>(tiles.data_ptr<at::BFloat16>()),
                        reinterpret_cast<uint16_t*>(tail.data_ptr<at::BFloat16>()));
  return {tiles, tail};
}

// x [..., K] float32 by pack_bf16's tiles and tail for w [N, K] -> y [..., N] float32 (no bias,
// allocated): checks the shapes (op names the op in the messages), then core(X, P, Q, Y, M, N,
// K, b0, b1) computes blocks b0 .. b1 - 1 of the blocks output channels, split over threads in
// grains of grain blocks.
template <class Core>
torch::Tensor bf16_product(const char* op, const torch::Tensor& x, const torch::Tensor& tiles,
                           const torch::Tensor& tail, int64_t N, int64_t blocks, int64_t grain,
                           Core core) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, op, ": x must be float32");
  auto xs = x.contiguous();
  const int64_t K = xs.size(-1), T = f32_core::tiles(N), K8 = K / 8, rem = K % 8, R = f32_core::R;
  TORCH_CHECK(tiles.scalar_type() == torch::kBFloat16 && tiles.is_contiguous() &&
                  tiles.sizes() == torch::IntArrayRef({T, K8, R, 8}),
              op, ": tiles do not match x [..., K] and N (pack_bf16)");
  TORCH_CHECK(tail.scalar_type() == torch::kBFloat16 && tail.is_contiguous() &&
                  tail.sizes() == torch::IntArrayRef({T, R, rem}),
              op, ": tail does not match x [..., K] and N (pack_bf16)");
  const int64_t M = K > 0 ? xs.numel() / K : 0;
  auto y = output(xs, N);
  if (M == 0 || N == 0) return y;
  const float* X = xs.data_ptr<float>();
  const uint16_t* P = reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>());
  const uint16_t* Q = reinterpret_cast<const uint16_t*>(tail.data_ptr<at::BFloat16>());
  float* Y = y.data_ptr<float>();
  vocalis_lend::parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    core(X, P, Q, Y, M, N, K, b0, b1);
  });
  return y;
}

// x [..., K] float32, tiles and tail of pack_bf16 for w [N, K] -> y [..., N] float32 (no bias):
// bit for bit f32_linear(x, w as float32); threads take blocks of 8 tiles of 4 channels.
torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor tiles, torch::Tensor tail, int64_t N) {
  return bf16_product("bf16_linear", x, tiles, tail, N, f32_core::tiles(N), 8,
                      f32_core::bf16_linear);
}

// x [..., K] float32, tiles and tail of pack_bf16 for w [N, K] -> y [..., N] float32 (no bias),
// summed as f32_core::bf16_gemm says (prompt passes: many rows); threads take panels of 16
// output channels.
torch::Tensor bf16_gemm(torch::Tensor x, torch::Tensor tiles, torch::Tensor tail, int64_t N) {
  return bf16_product("bf16_gemm", x, tiles, tail, N, f32_core::panels(N), 1,
                      f32_core::bf16_gemm);
}

// x float32 (any shape) -> f(x) value by value, a new contiguous tensor, in blocks of at least
// `grain` values over the calling thread's intra-op threads.
torch::Tensor pointwise(const char* name, torch::Tensor x, int64_t grain,
                        void (*f)(const float*, float*, int64_t)) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, name, ": x must be float32");
  auto xs = x.contiguous();
  auto y = torch::empty_like(xs, at::MemoryFormat::Contiguous);
  const float* X = xs.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  at::parallel_for(0, xs.numel(), grain, [&](int64_t b, int64_t e) { f(X + b, Y + b, e - b); });
  return y;
}

// elu(x) (alpha 1): f32_core::elu.
torch::Tensor elu(torch::Tensor x) { return pointwise("elu", x, 32768, f32_core::elu); }

// gelu(x), tanh approximation: f32_core::gelu_tanh.
torch::Tensor gelu_tanh(torch::Tensor x) {
  return pointwise("gelu_tanh", x, 16384, f32_core::gelu_tanh);
}

// The weights of one SEANet upsampling block packed for seanet_block (f32_core::pack_seanet):
// w0 [Ci, C, 2S] (the transposed convolution), w1 [H, C, K1], w2 [C, H, 1] (the residual
// block's) -> w0p [C 2S / 4, Ci, 4], w1p [H / 4, C K1, 4], w2p [C / 4, H, 4], float32.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> pack_seanet(torch::Tensor w0,
                                                                    torch::Tensor w1,
                                                                    torch::Tensor w2) {
  for (const auto* t : {&w0, &w1, &w2})
    TORCH_CHECK(t->scalar_type() == torch::kFloat32 && t->device().is_cpu() && t->dim() == 3,
                "pack_seanet: the weights must be float32 [out, in, kernel] on the CPU");
  const int64_t Ci = w0.size(0), C = w0.size(1), K0 = w0.size(2), H = w1.size(0), K1 = w1.size(2);
  TORCH_CHECK(K0 % 2 == 0 && C % 4 == 0 && H % 4 == 0 && w1.size(1) == C && w2.size(0) == C &&
                  w2.size(1) == H && w2.size(2) == 1,
              "pack_seanet: w0 [Ci, C, 2S], w1 [H, C, K1], w2 [C, H, 1], C and H multiples of 4");
  auto w0p = torch::empty({C * K0 / 4, Ci, 4}, torch::kFloat32);
  auto w1p = torch::empty({H / 4, C * K1, 4}, torch::kFloat32);
  auto w2p = torch::empty({C / 4, H, 4}, torch::kFloat32);
  f32_core::pack_seanet(w0.contiguous().data_ptr<float>(), w1.contiguous().data_ptr<float>(),
                        w2.contiguous().data_ptr<float>(), Ci, C, K0 / 2, H, K1,
                        w0p.data_ptr<float>(), w1p.data_ptr<float>(), w2p.data_ptr<float>());
  return {w0p, w1p, w2p};
}

// The threads of this thread's OpenMP pool computing one row of a SEANet block together
// (f32_core::seanet_block's team): the stages meet at OpenMP barriers.
struct OmpTeam {
  int id, size;
  void sync() const {
#pragma omp barrier
  }
};

// One upsampling block of the SEANet decoder (f32_core::seanet_block) for u [B, Ci, n]: ELU,
// the transposed convolution of stride S (w0p of pack_seanet, b0 [C]), the residual block
// (w1p, b1 [H], dilation d1; w2p, b2 [C]), and, when w3 is given, ELU and the output
// convolution w3 [O, C, K3], b3 [O]; the streaming states s0 [B, C, S] (the transposed
// convolution's partial sums, without bias), s1 [B, C, (K1 - 1) d1] (the previous values of the
// residual block's first ELU) and s3 [B, C, K3 - 1] (of the ELU before the output
// convolution; with w3 only) -> (y [B, C, n S] or out [B, O, n S], the next s0, s1 and s3
// (empty without w3)), new tensors. Threads take rows; a lone row, the parts of each stage.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> seanet_block(
    torch::Tensor u, torch::Tensor s0, torch::Tensor w0p, torch::Tensor b0, int64_t stride,
    torch::Tensor s1, torch::Tensor w1p, torch::Tensor b1, torch::Tensor w2p, torch::Tensor b2,
    int64_t d1, std::optional<torch::Tensor> s3, std::optional<torch::Tensor> w3,
    std::optional<torch::Tensor> b3) {
  const bool last = w3.has_value();
  TORCH_CHECK(last == s3.has_value() && last == b3.has_value(),
              "seanet_block: s3, w3 and b3 go together");
  std::vector<const torch::Tensor*> all{&u, &s0, &w0p, &b0, &s1, &w1p, &b1, &w2p, &b2};
  if (last) all.insert(all.end(), {&*s3, &*w3, &*b3});
  for (const auto* t : all)
    TORCH_CHECK(t->scalar_type() == torch::kFloat32 && t->device().is_cpu(),
                "seanet_block: every tensor must be float32 on the CPU");
  const int64_t S = stride;
  TORCH_CHECK(S >= 1 && d1 >= 1, "seanet_block: stride and dilation must be >= 1");
  TORCH_CHECK(u.dim() == 3 && w0p.dim() == 3 && w1p.dim() == 3 && w2p.dim() == 3 &&
                  w0p.size(2) == 4 && w1p.size(2) == 4 && w2p.size(2) == 4 &&
                  w0p.is_contiguous() && w1p.is_contiguous() && w2p.is_contiguous() &&
                  (!last || w3->dim() == 3),
              "seanet_block: u [B, Ci, n], the weights as pack_seanet packs them and w3 [O, C, "
              "K3]");
  const int64_t B = u.size(0), Ci = u.size(1), n = u.size(2), C = w0p.size(0) * 4 / (2 * S);
  const int64_t H = w1p.size(0) * 4, K1 = C > 0 ? w1p.size(1) / C : 0, P1 = (K1 - 1) * d1;
  const int64_t O = last ? w3->size(0) : 0, K3 = last ? w3->size(2) : 1, P3 = K3 - 1;
  TORCH_CHECK(C > 0 && w0p.size(0) * 4 == C * 2 * S && w0p.size(1) == Ci && K1 >= 1 &&
                  w1p.size(1) == C * K1 && w2p.size(0) * 4 == C && w2p.size(1) == H &&
                  b0.numel() == C && b1.numel() == H && b2.numel() == C && K3 >= 1 &&
                  (!last || (w3->size(1) == C && b3->numel() == O)),
              "seanet_block: the weights do not match u [B, Ci, n] and the stride");
  TORCH_CHECK(s0.sizes() == torch::IntArrayRef({B, C, S}) &&
                  s1.sizes() == torch::IntArrayRef({B, C, P1}) &&
                  (!last || s3->sizes() == torch::IntArrayRef({B, C, P3})),
              "seanet_block: the states must be [B, C, S], [B, C, (K1 - 1) d1] and "
              "[B, C, K3 - 1]");
  auto us = u.contiguous();
  auto n0 = s0.contiguous().clone(), n1 = s1.contiguous().clone();
  auto n3 = last ? s3->contiguous().clone() : torch::empty({B, C, 0}, torch::kFloat32);
  auto b0c = b0.contiguous(), b1c = b1.contiguous(), b2c = b2.contiguous();
  auto w3c = last ? w3->contiguous() : torch::empty({0}, torch::kFloat32);
  auto b3c = last ? b3->contiguous() : torch::empty({0}, torch::kFloat32);
  auto out = torch::empty({B, last ? O : C, n * S}, torch::kFloat32);
  const f32_core::SeanetBlock L{Ci, C, S, H, K1, d1, K3, O, w0p.data_ptr<float>(),
                                b0c.data_ptr<float>(), w1p.data_ptr<float>(),
                                b1c.data_ptr<float>(), w2p.data_ptr<float>(),
                                b2c.data_ptr<float>(), w3c.data_ptr<float>(),
                                b3c.data_ptr<float>()};
  const float* X = us.data_ptr<float>();
  float *S0 = n0.data_ptr<float>(), *S1 = n1.data_ptr<float>(), *S3 = n3.data_ptr<float>();
  float* Y = out.data_ptr<float>();
  const int64_t rowout = out.size(1) * n * S;
  // rows of one tile (the first block: 16 frames of 512 channels, 6 MB of weights) share the
  // transposed convolution's weights: its products for every row first, then the rest by row
  std::vector<float> pre;
  int64_t W = 0;
  if (n <= 32 && B > 1) {
    W = f32_core::seanet_columns(B, n);
    std::vector<float> U(Ci * W, 0.f);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t ci = 0; ci < Ci; ++ci)
        f32_core::elu(X + (r * Ci + ci) * n, U.data() + ci * W + r * n, n);
    pre.resize(C * 2 * S * W);
    at::parallel_for(0, C * 2 * S / 4, 8, [&](int64_t m0, int64_t m1) {
      f32_core::seanet_products(L, U.data(), W, pre.data(), m0, m1);
    });
  }
#ifdef _OPENMP
  const int threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  if (B == 1 && threads > 1) {  // a lone row (a stream's first frame): every thread on it
    std::vector<float> buf(f32_core::seanet_floats(L, n));
#pragma omp parallel num_threads(threads)
    f32_core::seanet_block(L, X, n, S0, S1, S3, Y, buf.data(), nullptr, 0,
                           OmpTeam{omp_get_thread_num(), omp_get_num_threads()});
    return {out, n0, n1, n3};
  }
#endif
  at::parallel_for(0, B, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(f32_core::seanet_floats(L, n));
    for (int64_t r = r0; r < r1; ++r)
      f32_core::seanet_block(L, X + r * Ci * n, n, S0 + r * C * S, S1 + r * C * P1,
                             S3 + r * C * P3, Y + r * rowout, buf.data(),
                             pre.empty() ? nullptr : pre.data() + r * n, W);
  });
  return {out, n0, n1, n3};
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
  m.def("bf16_gemm(Tensor x, Tensor tiles, Tensor tail, int n) -> Tensor");
  m.impl("bf16_gemm", torch::kCPU, &bf16_gemm);
  m.def("elu(Tensor x) -> Tensor");
  m.impl("elu", torch::kCPU, &elu);
  m.def("gelu_tanh(Tensor x) -> Tensor");
  m.impl("gelu_tanh", torch::kCPU, &gelu_tanh);
  m.def("pack_seanet(Tensor w0, Tensor w1, Tensor w2) -> (Tensor, Tensor, Tensor)");
  m.impl("pack_seanet", torch::kCPU, &pack_seanet);
  m.def("seanet_block(Tensor u, Tensor s0, Tensor w0p, Tensor b0, int stride, Tensor s1, "
        "Tensor w1p, Tensor b1, Tensor w2p, Tensor b2, int d1, Tensor? s3, Tensor? w3, "
        "Tensor? b3) -> (Tensor, Tensor, Tensor, Tensor)");
  m.impl("seanet_block", torch::kCPU, &seanet_block);
}
