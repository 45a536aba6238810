// vocalis: int8 linear as torch.ops.vocalis_q8 (Qwen3-TTS quantize="int8", and the prompt
// passes of "int4"): the PyTorch side (shapes, checks, buffers, threads) of the arithmetic in
// q8_core.h, which gives the format and how it sums (the same results on every instruction
// set). Built once per machine by `vocalis kernels build` (vocalis/kernels/native.py).
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>

#include <cstdint>

#include "lend.h"
#include "q8_core.h"

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
  const int64_t T = w.size(0), Kp = w.size(1) / q8_core::R, KB = q8_core::KB;
  TORCH_CHECK(T == q8_core::tiles(N) && Kp % KB == 0 && Kp >= K && Kp - K < KB,
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
  for (int64_t m = 0; m < M; ++m) SX[m] = q8_core::quantize_row(X + m * K, K, Kp, A + m * Kp);
  std::vector<int64_t> shape(xs.sizes().begin(), xs.sizes().end());
  shape.back() = N;
  auto y = torch::empty(shape, torch::kFloat32);
  const int8_t* W = w.data_ptr<int8_t>();
  const float* S = scales.data_ptr<float>();
  const int32_t* Z = sums.data_ptr<int32_t>();
  float* Y = y.data_ptr<float>();
  vocalis_lend::parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    q8_core::linear(A, SX, W, S, Z, Y, M, N, Kp, t0, t1);
  });
  return y;
}

// w [N, K] float32 -> {tiles [ceil(N/4), 4*Kp] int8, scales [N] float32, sums [N] int32 (of each
// channel's int8 weights)}, Kp = K rounded up to 32 (the layout: q8_core::pack).
std::vector<torch::Tensor> q8_pack(torch::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32, "q8_pack: w must be float32 [N, K]");
  auto ws = w.contiguous();
  const int64_t N = ws.size(0), K = ws.size(1), Kp = q8_core::padded(K), T = q8_core::tiles(N);
  auto tiles = torch::zeros({T, q8_core::R * Kp}, torch::kInt8);
  auto scales = torch::empty({N}, torch::kFloat32);
  auto sums = torch::empty({N}, torch::kInt32);
  const float* Wp = ws.data_ptr<float>();
  int8_t* P = tiles.data_ptr<int8_t>();
  float* S = scales.data_ptr<float>();
  int32_t* Z = sums.data_ptr<int32_t>();
  at::parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) { q8_core::pack(Wp, K, P, S, Z, n0, n1); });
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
