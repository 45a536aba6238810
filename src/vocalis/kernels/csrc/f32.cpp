// vocalis: float32 linear as torch.ops.vocalis_f32 (Qwen3-TTS model_linears="vocalis", Pocket
// TTS flow_linears="vocalis", whose prompt passes run bf16_gemm, and codec_linears="vocalis"),
// ELU (Pocket TTS codec_elu="vocalis") and GELU (Pocket TTS gelu="vocalis"): the PyTorch side
// (shapes, checks, outputs, threads) of the arithmetic
// in f32_core.h, which says how it sums (one order on every instruction set).
// The point of the kernel is lend.h: while the engine's codec thread waits, its core takes
// blocks of the output channels (two cores read memory faster than one; figures in
// docs/speed-choices.md, "Engine threads").
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>

#include <cstdint>

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
}
