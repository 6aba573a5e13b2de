#include "sim_core/experiments/expression.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

// Recursive descent over the grammar
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '/') unary)*
//   unary   := '-' unary | power
//   power   := atom ('^' unary)?          (right associative, binds tighter than unary minus)
//   atom    := number | name | name '(' sum (',' sum)* ')' | '(' sum ')'
class Parser {
 public:
  // `any_name`: an unknown variable reads as 1 instead of failing (a syntax check).
  Parser(std::string_view text, const std::map<std::string, double>& vars, const std::string& where,
         bool any_name = false)
      : text_(text), vars_(vars), where_(where), any_name_(any_name) {}

  double parse() {
    const double v = sum();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(
        where_, fmt::format("in expression \"{}\" at character {}: {}", text_, pos_ + 1, what));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(fmt::format("expected '{}'", c));
  }

  double sum() {
    double v = product();
    for (;;) {
      if (accept('+'))
        v += product();
      else if (accept('-'))
        v -= product();
      else
        return v;
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      if (accept('*'))
        v *= unary();
      else if (accept('/'))
        v /= unary();
      else
        return v;
    }
  }
  double unary() {
    if (accept('-')) return -unary();
    return power();
  }
  double power() {
    const double base = atom();
    if (accept('^')) return std::pow(base, unary());
    return base;
  }
  double atom() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end, expected a number, name or '('");
    if (accept('(')) {
      const double v = sum();
      expect(')');
      return v;
    }
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return name();
    fail("unexpected '" + std::string(1, c) + "'");
  }
  double number() {
    const std::string rest(text_.substr(pos_));
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) fail("malformed number");
    pos_ += static_cast<std::size_t>(end - rest.c_str());
    return v;
  }
  double name() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    const std::string id(text_.substr(start, pos_ - start));
    if (accept('(')) return call(id);
    const auto it = vars_.find(id);
    if (it == vars_.end() && any_name_) return 1;
    if (it == vars_.end()) {
      pos_ = start;
      fail(fmt::format("unknown variable \"{}\"", id));
    }
    return it->second;
  }
  double call(const std::string& fn) {
    std::vector<double> args{sum()};
    while (accept(',')) args.push_back(sum());
    expect(')');
    auto arity = [&](std::size_t n) {
      if (args.size() != n) fail(fmt::format("{}() takes {} argument(s)", fn, n));
    };
    if (fn == "min" || fn == "max") {
      if (args.size() < 2) fail(fn + "() takes at least 2 arguments");
      double v = args[0];
      for (double a : args) v = fn == "min" ? std::min(v, a) : std::max(v, a);
      return v;
    }
    arity(1);
    if (fn == "sqrt") return std::sqrt(args[0]);
    if (fn == "log2") return std::log2(args[0]);
    if (fn == "ceil") return std::ceil(args[0]);
    if (fn == "floor") return std::floor(args[0]);
    fail(fmt::format("unknown function \"{}\" (known: min, max, sqrt, log2, ceil, floor)", fn));
  }

  std::string_view text_;
  const std::map<std::string, double>& vars_;
  const std::string& where_;
  bool any_name_;
  std::size_t pos_ = 0;
};

}  // namespace

double evaluate_expression(std::string_view text, const std::map<std::string, double>& variables,
                           const std::string& where) {
  return Parser(text, variables, where).parse();
}

void check_expression_syntax(std::string_view text, const std::string& where) {
  static const std::map<std::string, double> none;
  (void)Parser(text, none, where, /*any_name=*/true).parse();
}

}  // namespace mlsim
