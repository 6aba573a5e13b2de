#include "sim_core/scenario/strict_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

// Builds the document from nlohmann's SAX events, rejecting duplicate keys (nlohmann would
// silently keep the last) and excessive nesting with the JSON path.
//
// Not nlohmann's parse-with-callback: its DOM builder scans the whole enclosing container for
// discarded values after every object, which made an array of n small objects O(n^2) (a 4 MB
// scenario took 7 s, 63 MB over a minute; issue 17). Here every event is O(1) apart from the
// key lookup in its own object (O(log keys)), so parsing is linear in the text.
template <typename json>
class StrictDomBuilder final : public nlohmann::json_sax<json> {
  using typename nlohmann::json_sax<json>::number_integer_t;
  using typename nlohmann::json_sax<json>::number_unsigned_t;
  using typename nlohmann::json_sax<json>::number_float_t;
  using typename nlohmann::json_sax<json>::string_t;
  using typename nlohmann::json_sax<json>::binary_t;

 public:
  explicit StrictDomBuilder(const std::string& file) : file_(file) {}

  json take() { return std::move(root_); }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override {
    throw InputError(file_, path(), "binary values are not JSON");  // unreachable for text input
  }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    auto [it, inserted] = f.container->emplace(std::move(k), nullptr);
    f.key = it.key();
    if (!inserted) throw InputError(file_, path(), "duplicate key");
    f.slot = &it.value();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw InputError(file_, "", "invalid JSON: " + without_nlohmann_prefix(e.what()));
  }

 private:
  struct Frame {
    json* container;
    json* slot = nullptr;  // objects: the member the next value goes to
    std::string key;       // objects: that member's key (for error paths only)
    long index = -1;       // arrays: the index of the element being read
  };

  // Where the next value goes; counts array elements for paths.
  json* place(json v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.container->is_object()) {
      *f.slot = std::move(v);
      return f.slot;
    }
    ++f.index;
    f.container->push_back(std::move(v));
    return &f.container->back();
  }
  bool value(json v) {
    place(std::move(v));
    return true;
  }
  bool open(json empty) {
    if (frames_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      // Name the element that crossed the limit, as a path down to it.
      if (!frames_.empty() && frames_.back().container->is_array()) ++frames_.back().index;
      throw InputError(file_, path(), fmt::format("nesting deeper than {} levels", kMaxJsonDepth));
    }
    json* at = place(std::move(empty));
    frames_.push_back(Frame{at, nullptr, {}, -1});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  std::string path() const {
    std::string out;
    for (const auto& f : frames_) {
      if (f.container->is_object()) {
        if (f.slot) out += (out.empty() ? "" : ".") + f.key;
      } else if (f.index >= 0) {
        out += fmt::format("[{}]", f.index);
      }
    }
    return out;
  }
  static std::string without_nlohmann_prefix(std::string what) {
    // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
    if (!what.empty() && what[0] == '[') {
      const auto close = what.find("] ");
      if (close != std::string::npos) what.erase(0, close + 2);
    }
    return what;
  }

  const std::string& file_;
  json root_;
  std::vector<Frame> frames_;
};

template <typename json>
json parse_strict(std::string_view text, const std::string& file) {
  StrictDomBuilder<json> builder(file);
  try {
    json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file, "", "invalid JSON: " + std::string(e.what()));
  }
  return builder.take();
}

template <typename json>
int depth_up_to(const json& v, int limit) {
  if (!v.is_structured() || limit <= 0) return v.is_structured() ? 1 : 0;
  int deepest = 0;
  for (const auto& child : v) {
    deepest = std::max(deepest, depth_up_to(child, limit - 1));
    if (deepest >= limit) break;
  }
  return 1 + deepest;
}

}  // namespace

nlohmann::json parse_strict_json(std::string_view text, const std::string& file) {
  return parse_strict<nlohmann::json>(text, file);
}

nlohmann::ordered_json parse_strict_ordered_json(std::string_view text, const std::string& file) {
  return parse_strict<nlohmann::ordered_json>(text, file);
}

int json_nesting_depth(const nlohmann::json& value, int limit) {
  return depth_up_to(value, limit);
}

}  // namespace mlsim
