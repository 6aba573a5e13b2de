#pragma once
// PipeDream's 1F1B schedule (asynchronous, weight stashing, no flush) and an exact timing model
// of it.
//
// Order. Stage s of S admits at most S - s minibatches in flight (forward done, backward not):
// it runs the forward of its next minibatch while fewer than S - s are in flight and minibatches
// remain, otherwise the backward of its oldest one. This gives the warm-up of S - s forwards,
// then strict alternation, then the remaining backwards. A stage waits for the input of the op
// the order names (an activation from stage s - 1, a gradient from stage s + 1) even when the
// other kind is ready, as PipeDream's runtime does.
//
// Timing (estimate_1f1b): each op starts when its stage is free and its input has arrived. A
// stage sends an activation forward after each forward and a gradient back after each backward
// (the last stage's backward follows its own forward); transfers leave a stage's host one at a
// time, in the order the stage produced them (one NIC), taking bytes / bandwidth of the link
// between the two stages, and arrive one latency later. This is the model AutoPipe's oracle
// evaluates candidate partitions with; the simulated run (pipeline_training.hpp) replaces the
// FIFO NIC with the scenario's network backend.
#include <cstddef>

#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline {

enum class Op { kForward, kBackward, kNone };

// The next op of a stage that has done `forwards` forwards and `backwards` backwards, out of
// `minibatches`; kNone when it is finished.
inline Op next_op(std::size_t stage, std::size_t stages, std::size_t forwards,
                  std::size_t backwards, std::size_t minibatches) {
  if (forwards < minibatches && forwards - backwards < stages - stage) return Op::kForward;
  if (backwards < forwards) return Op::kBackward;
  return Op::kNone;
}

// Seconds from the start until the last stage-0 backward of `minibatches` ends.
double estimate_1f1b(const StageCosts& costs, const Conditions& c, std::size_t minibatches);

// Steady-state seconds per minibatch of a partition: the slope of estimate_1f1b between 2S and
// 6S minibatches (warm-up excluded).
double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c);

}  // namespace mlsim::pipeline
