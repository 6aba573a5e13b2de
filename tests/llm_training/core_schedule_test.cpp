// Megatron's non-interleaved 1F1B (models/llm_training/megatron_source.hpp, the execution graph's
// stage programs) against the training core's PipelineSchedule with Megatron's two flags
// (models/training/pipeline_schedule.hpp): step 2 of docs/training.md's plan for LLM jobs on the
// core. For every stage of every small (PP, M, DP), the core names the same forwards and
// backwards in the same order, a forward or backward needs an input exactly where Megatron
// receives one before it, ends after its send exactly where Megatron sends after it, and only the
// last backward hands gradients over (Megatron's data-parallel sync after the last backward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "models/llm_training/megatron_source.hpp"
#include "models/training/pipeline_schedule.hpp"

namespace mlsim::llm_training {
namespace {

using Step = MegatronSource::Step;

// One compute step as both sides describe it.
struct CoreOp {
  bool forward;
  std::size_t micro_batch;
  bool needs_input, ends_after_send, hands_gradients;
  friend bool operator==(const CoreOp&, const CoreOp&) = default;
};

std::ostream& operator<<(std::ostream& o, const CoreOp& op) {
  return o << (op.forward ? "F" : "B") << op.micro_batch << (op.needs_input ? " in" : "")
           << (op.ends_after_send ? " send" : "") << (op.hands_gradients ? " hands" : "");
}

bool receives(Step s, bool forward) {
  return forward ? s == Step::kRecvForward || s == Step::kSendBackwardRecvForward
                 : s == Step::kRecvBackward || s == Step::kSendForwardRecvBackward;
}

bool sends(Step s, bool forward) {
  return forward ? s == Step::kSendForward || s == Step::kSendForwardRecvBackward
                 : s == Step::kSendBackward || s == Step::kSendBackwardRecvForward;
}

// Megatron's program of stage s read as compute ops: the communication steps between two compute
// steps say whether the next one received its input and the previous one sent its output.
std::vector<CoreOp> megatron_ops(int s, int pp, int m) {
  const std::vector<Step> program = MegatronSource::stage_program(s, pp, m);
  std::vector<CoreOp> out;
  std::size_t forwards = 0, backwards = 0;
  for (std::size_t i = 0; i < program.size(); ++i) {
    const Step step = program[i];
    if (step != Step::kForward && step != Step::kBackward) continue;
    const bool forward = step == Step::kForward;
    CoreOp op{forward, forward ? forwards++ : backwards++, false, false, false};
    for (std::size_t j = i;
         j-- > 0 && program[j] != Step::kForward && program[j] != Step::kBackward;)
      op.needs_input = op.needs_input || receives(program[j], forward);
    for (std::size_t j = i + 1;
         j < program.size() && program[j] != Step::kForward && program[j] != Step::kBackward; ++j) {
      op.ends_after_send = op.ends_after_send || sends(program[j], forward);
      // The data-parallel sync comes right after the last backward (and its send).
      op.hands_gradients = op.hands_gradients || program[j] == Step::kDataSync;
    }
    out.push_back(op);
  }
  return out;
}

// The core's ops of worker w, run to the end of its iteration.
std::vector<CoreOp> core_ops(const training::PipelineSchedule& schedule, std::size_t w) {
  std::vector<CoreOp> out;
  std::size_t forwards = 0, backwards = 0;
  while (const auto op = schedule.next(w, forwards, backwards)) {
    out.push_back(
        {op->forward, op->micro_batch, op->needs_input, op->ends_after_send, op->hands_gradients});
    (op->forward ? forwards : backwards)++;
  }
  return out;
}

TEST(MegatronOnTheCore, PipelineScheduleWithMegatronsFlagsGivesItsNonInterleaved1F1B) {
  for (int pp = 1; pp <= 5; ++pp)
    for (int m = 1; m <= 8; ++m)
      for (std::size_t dp = 1; dp <= 3; ++dp) {
        // Stage s holds layer s and runs on the dp workers s x dp ... (DP index innermost here);
        // the schedule's micro-batches are every pipeline's, dealt round-robin.
        std::vector<std::size_t> first_layer, replicas(static_cast<std::size_t>(pp), dp);
        for (int s = 0; s <= pp; ++s) first_layer.push_back(static_cast<std::size_t>(s));
        training::PipelineSchedule schedule(
            training::PipelineSchedule::Kind::kOneFOneB, first_layer, replicas,
            dp * static_cast<std::size_t>(pp), static_cast<std::size_t>(m) * dp);
        schedule.set_sync_after_last_backward(true);
        schedule.set_blocking_sends(true);
        for (int s = 0; s < pp; ++s) {
          const std::vector<CoreOp> want = megatron_ops(s, pp, m);
          ASSERT_EQ(want.size(), 2u * static_cast<std::size_t>(m));
          // Megatron's warm-up, min(PP - s - 1, M) forwards, then a forward before the first
          // backward (unless the warm-up took every micro-batch).
          std::size_t leading = 0;
          while (leading < want.size() && want[leading].forward) ++leading;
          EXPECT_EQ(leading, static_cast<std::size_t>(std::min(pp - s, m)));
          for (std::size_t d = 0; d < dp; ++d)
            EXPECT_EQ(core_ops(schedule, static_cast<std::size_t>(s) * dp + d), want)
                << "PP " << pp << ", M " << m << ", DP " << dp << ", stage " << s << ", replica "
                << d;
        }
      }
}

}  // namespace
}  // namespace mlsim::llm_training
