// vocalis: 4-bit weight-only linear as torch.ops.vocalis_q4 (Qwen3-TTS quantize="int4"): the
// PyTorch side (shapes, checks, buffers, threads) of the arithmetic in q4_core.h, which gives
// the format and how it sums (the same results on every instruction set). Built once per
// machine by `vocalis kernels build` (vocalis/kernels/native.py).
#include <torch/library.h>  // TORCH_LIBRARY: no Python headers needed
#include <torch/types.h>
#include <ATen/Parallel.h>

#include <cstdint>

#include "lend.h"
#include "q4_core.h"

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
  q4_core::quantize_rows(xs.data_ptr<float>(), M, K, Kp, q.data_ptr<int8_t>(), d.data_ptr<float>(),
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
      q4_core::linear_row(W, S, Q, D, C, Y, Kp, n0, n1);
    });
    return y;
  }
  constexpr int64_t NT = q4_core::NT;
  vocalis_lend::parallel_for((N + NT - 1) / NT, 1, [&](int64_t t0, int64_t t1) {
    q4_core::linear_rows(W, S, Q, D, C, Y, M, N, Kp, t0, t1);
  });
  return y;
}

// w [N, K] float32 -> packed [N, Kp/2] uint8 and scales [N, Kp/32] float32, Kp = K rounded up to
// 256 (the format: q4_core::pack).
std::vector<torch::Tensor> q4_pack(torch::Tensor w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32, "q4_pack: w must be float32 [N, K]");
  auto ws = w.contiguous();
  const int64_t N = ws.size(0), K = ws.size(1), Kp = q4_core::padded(K), B = Kp / 32;
  auto packed = torch::empty({N, Kp / 2}, torch::kUInt8);
  auto scales = torch::empty({N, B}, torch::kFloat32);
  const float* Wp = ws.data_ptr<float>();
  uint8_t* P = packed.data_ptr<uint8_t>();
  float* S = scales.data_ptr<float>();
  at::parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) { q4_core::pack(Wp, K, P, S, n0, n1); });
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
