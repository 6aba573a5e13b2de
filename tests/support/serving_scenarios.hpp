#pragma once
// A small serving scenario the command-level tests run as a user would: Llama-2-7B at TP 1 on
// A100-80GB GPUs of one host, priced by the shipped roofline (no shared data needed), one replica
// with continuous batching, and a generator of `count` requests of fixed lengths at `rate` per
// second. Catalogs are included from the source tree.
#include <nlohmann/json.hpp>
#include <string>

namespace mlsim::testing {

struct SmallServing {
  std::string name = "serving_small";
  int gpus_per_host = 1;
  double rate = 1;
  int count = 1;
  int prompt_tokens = 1024;
  int output_tokens = 2;
};

inline std::string small_serving_scenario(const SmallServing& s) {
  const std::string src = MLSIM_SOURCE_DIR;
  return R"({"name": ")" + s.name + R"(", "seed": 1,
    "include": [")" +
         src + R"(/workloads/hardware/gpus.json", ")" + src +
         R"(/workloads/hardware/engines.json", ")" + src +
         R"(/workloads/collectives/nccl_a100.json"],
    "topology": {"kind": "star", "hosts": 1, "link": {"bandwidth": "100GB/s", "latency": "1us"},
                 "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_host": )" +
         std::to_string(s.gpus_per_host) + R"(}},
    "compute": {"providers": ["roofline"], "roofline": ")" +
         src + R"(/workloads/hardware/roofline_calibration.json"},
    "system": {"model": "serving", "catalog": ")" +
         src + R"(/workloads/models/llama2.json", "family": ["llama-2-7b"],
               "mode": "separate", "separate": [{"model": "llama-2-7b", "tp": 1, "replicas": 1}],
               "scheduler": "continuous"},
    "workload": {"source": "generator",
                 "generator": {"rate": )" +
         nlohmann::json(s.rate).dump() + R"(, "count": )" + std::to_string(s.count) +
         R"(, "prompt_tokens": )" + std::to_string(s.prompt_tokens) + R"(, "output_tokens": )" +
         std::to_string(s.output_tokens) + "}}}";
}

}  // namespace mlsim::testing
