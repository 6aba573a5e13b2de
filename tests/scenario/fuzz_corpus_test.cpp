// Replays the committed fuzz corpus (fuzz/corpus/) through the same harness as the libFuzzer
// target, without libFuzzer: every input must load, prepare and run a short while, or fail with
// InputError (or stop at the run's budget with LimitError), nothing else.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/registry.hpp"
#include "fuzz/fuzz_input.hpp"
#include "sim_core/base/error.hpp"

TEST(FuzzCorpus, EveryInputRunsOrFailsWithInputError) {
  const auto registries = mlsim::make_registries();
  const std::filesystem::path corpus = std::filesystem::path(MLSIM_SOURCE_DIR) / "fuzz/corpus";
  int inputs = 0, accepted = 0, ran = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    ++inputs;
    try {
      const bool ended = mlsim::fuzz::run_fuzz_input(text.str(), registries, MLSIM_SOURCE_DIR);
      ++accepted;
      ran += ended ? 1 : 0;
    } catch (const mlsim::InputError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path().filename() << ": " << typeid(e).name() << ": " << e.what();
    }
  }
  EXPECT_GE(inputs, 10);
  // quickstart, explicit and fat_tree_with_hardware load once the collectives model is
  // registered: the corpus then also exercises the loader's success path.
  EXPECT_GE(accepted, 3);
  RecordProperty("accepted", accepted);
  RecordProperty("ran_to_the_end", ran);
  // stopped_by_budget.txt (the quickstart's ring in 4096 chunks, about 800 000 events) stops at
  // the fuzz budget of 2^18 events: the limit path is exercised too.
  EXPECT_LT(ran, accepted);
}
