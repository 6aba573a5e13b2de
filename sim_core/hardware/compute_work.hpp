#pragma once
// Work a GPU can run (Compute, compute.hpp): an operator described by its FLOPs and HBM bytes, a
// layer time profiled on some GPU, or a fixed time. Times are nominal: at host speed 1.
#include <cstdint>
#include <string_view>
#include <variant>

#include "sim_core/base/time.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim {

// The transformer shape a profiled operator was measured for (profile tables are keyed by it;
// Vidur's tables by hidden size, heads, KV heads, FFN size and tensor-parallel degree).
struct OperatorShape {
  std::int32_t hidden = 0;
  std::int32_t heads = 0;
  std::int32_t kv_heads = 0;
  std::int32_t ffn = 0;
  std::int32_t tp = 1;
  friend bool operator==(const OperatorShape&, const OperatorShape&) = default;
  friend auto operator<=>(const OperatorShape&, const OperatorShape&) = default;
};

// One kernel: `op` names it as profile tables do (e.g. Vidur's "mlp_up_proj"); flops and bytes
// are what it computes and moves through HBM on one GPU; `tokens` is the token count it runs on
// (the profile tables' axis, and the regime of a per-regime roofline). `seq_len`, for attention
// kernels, is the sequence length the kernel's speed depends on (0: not given); a roofline whose
// operator has a published efficiency by sequence length uses it (cost_model.hpp).
struct OperatorWork {
  std::string_view op;  // must outlive the call (a static name)
  double flops = 0;
  double bytes = 0;
  Dtype dtype = Dtype::kFp16;
  std::int64_t tokens = 0;
  OperatorShape shape;
  std::int64_t seq_len = 0;
};

// A time measured on `measured_on` (e.g. a PipeDream layer profile) for work in `dtype`;
// `bytes`, when known (> 0), is the HBM traffic it implies, which lets scaling to another GPU
// treat the memory-bound part by HBM bandwidth (cost_model.hpp: scale_profiled_time).
struct ProfiledWork {
  double seconds = 0;
  const GpuSpec* measured_on = nullptr;
  Dtype dtype = Dtype::kFp32;
  double bytes = 0;
};

// A time that does not depend on the GPU type (still divided by the host's speed).
struct FixedWork {
  Time duration;
};

using Work = std::variant<OperatorWork, ProfiledWork, FixedWork>;

}  // namespace mlsim
