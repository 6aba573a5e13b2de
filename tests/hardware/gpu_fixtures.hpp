#pragma once
// A catalog-free GPU for hand-computed tests: round peak rates and HBM bandwidth.
#include <string>
#include <utility>

#include "sim_core/hardware/hardware.hpp"

namespace mlsim::test {

// fp16 and fp32 peaks in TFLOP/s (0: the GPU has no such format), HBM in GB/s, 16 GiB.
inline GpuSpec make_gpu(std::string name, double fp16_tflops, double fp32_tflops, double hbm_gbps) {
  GpuSpec g;
  g.name = std::move(name);
  if (fp16_tflops > 0) g.peak[Dtype::kFp16] = FlopRate{fp16_tflops * 1e12};
  if (fp32_tflops > 0) g.peak[Dtype::kFp32] = FlopRate{fp32_tflops * 1e12};
  g.hbm_bandwidth = Bandwidth{hbm_gbps * 1e9};
  g.hbm_capacity = Bytes{16LL << 30};
  g.source = "test";
  return g;
}

}  // namespace mlsim::test
