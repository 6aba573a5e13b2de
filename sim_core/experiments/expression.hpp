#pragma once
// A small arithmetic expression language for closed forms in claims, such as
// "2*(n-1)/n*S/B + 2*(n-1)*L": numbers, named variables, + - * / ^, unary minus, parentheses and
// the functions min, max, sqrt, log2, ceil, floor. Evaluated in double precision.
#include <map>
#include <string>
#include <string_view>

namespace mlsim {

// Throws InputError(where, ...) for a syntax error or an unknown variable or function.
double evaluate_expression(std::string_view text, const std::map<std::string, double>& variables,
                           const std::string& where);

// Throws InputError(where, ...) for a syntax error or an unknown function; names are not looked
// up (for expressions whose variables are known only later, such as a run's metrics).
void check_expression_syntax(std::string_view text, const std::string& where);

}  // namespace mlsim
