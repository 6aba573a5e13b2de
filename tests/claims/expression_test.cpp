#include "sim_core/experiments/expression.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"

using namespace mlsim;

TEST(Expression, PrecedenceAndAssociativity) {
  EXPECT_DOUBLE_EQ(evaluate_expression("1 + 2 * 3", {}, "x"), 7);
  EXPECT_DOUBLE_EQ(evaluate_expression("(1 + 2) * 3", {}, "x"), 9);
  EXPECT_DOUBLE_EQ(evaluate_expression("8 / 4 / 2", {}, "x"), 1);
  EXPECT_DOUBLE_EQ(evaluate_expression("2 ^ 3 ^ 2", {}, "x"), 512);  // right associative
  EXPECT_DOUBLE_EQ(evaluate_expression("-2 ^ 2", {}, "x"), -4);
  EXPECT_DOUBLE_EQ(evaluate_expression("10 - 4 - 3", {}, "x"), 3);
  EXPECT_DOUBLE_EQ(evaluate_expression("1.5e3 + .5", {}, "x"), 1500.5);
}

TEST(Expression, RingAllReduceClosedFormByHand) {
  // 8 nodes, 64 MiB, 50 GB/s, 500 ns: 2*7/8 * 67108864/5e10 + 14 * 5e-7.
  const std::map<std::string, double> v{{"n", 8}, {"S", 67108864}, {"B", 5e10}, {"L", 5e-7}};
  const double expected = 1.75 * 67108864 / 5e10 + 14 * 5e-7;
  EXPECT_DOUBLE_EQ(evaluate_expression("2*(n-1)/n*S/B + 2*(n-1)*L", v, "x"), expected);
}

TEST(Expression, Functions) {
  EXPECT_DOUBLE_EQ(evaluate_expression("max(1, 5, 3) + min(2, -1)", {}, "x"), 4);
  EXPECT_DOUBLE_EQ(evaluate_expression("log2(1024) + sqrt(16) + ceil(0.2) + floor(1.8)", {}, "x"),
                   16);
}

TEST(Expression, ErrorsNameThePlaceAndTheProblem) {
  try {
    evaluate_expression("2 * m", {{"n", 1}}, "claims[0].closed_form.expression");
    FAIL() << "an unknown variable must be rejected";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "claims[0].closed_form.expression");
    EXPECT_NE(std::string(e.what()).find("unknown variable \"m\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate_expression("(1 + 2", {}, "x"), InputError);
  EXPECT_THROW(evaluate_expression("1 +", {}, "x"), InputError);
  EXPECT_THROW(evaluate_expression("1 2", {}, "x"), InputError);
  EXPECT_THROW(evaluate_expression("cos(1)", {}, "x"), InputError);
  EXPECT_THROW(evaluate_expression("sqrt(1, 2)", {}, "x"), InputError);
  EXPECT_THROW(evaluate_expression("", {}, "x"), InputError);
}

TEST(Expression, SyntaxCheckLeavesNamesForLater) {
  // Names are not looked up (a run's metrics come later); syntax and functions are checked.
  EXPECT_NO_THROW(check_expression_syntax("serving_slo_attainment * 2 + max(a, b)", "x"));
  EXPECT_THROW(check_expression_syntax("m >= 1", "x"), InputError);
  EXPECT_THROW(check_expression_syntax("(m", "x"), InputError);
  EXPECT_THROW(check_expression_syntax("cos(m)", "x"), InputError);
}
