#pragma once
// A job as submitted: what it asks for and how much work it carries. The work is the job's
// runtime on the trace's reference GPU; the node pool scales it to the GPU type it gets.
#include <cstddef>
#include <cstdint>

#include "sim_core/base/time.hpp"

namespace mlsim::cluster {

// Bit i set = the job accepts GPU type i of the node pool (at most 32 types).
using TypeMask = std::uint32_t;
inline constexpr int kMaxGpuTypes = 32;

struct JobSpec {
  std::uint64_t id = 0;  // submission order, from 0
  Time submit;           // offset from the first job
  int gpus = 1;          // GPUs requested
  Time work;             // runtime on the reference GPU, start-up excluded
  int user = 0;          // index into the source's user names
  TypeMask types = 0;    // 0 = any type (resolved by the simulation)
  std::size_t line = 0;  // trace line, for messages; 0 for synthetic jobs
  // The detailed mode (communication_mode.hpp) only: the training model the job runs (an index
  // into workload.training.models; -1 = drawn at arrival) and its iterations (0 = as many as
  // fill `work` on the reference GPU).
  int model = -1;
  std::uint64_t iterations = 0;
  // Pipeline stages (0 = the model's `pipeline.stages`; 1 = data parallel): a listed job's.
  int stages = 0;
  // Its pipeline planner (-1 = the model's; else a StagePlanner, communication_mode.hpp): a
  // listed job's `planner`.
  int planner = -1;
  // GPUs on every node of its placement (0: any split, the default): a Megatron job's tensor-
  // parallel degree, so that each host holds one whole TP group (communication_mode.hpp).
  int gpus_per_node = 0;
};

}  // namespace mlsim::cluster
