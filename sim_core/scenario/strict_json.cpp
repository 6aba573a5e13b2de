#include "sim_core/scenario/strict_json.hpp"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

// Tracks the position inside the document while nlohmann's parser reports events, to reject
// duplicate keys (nlohmann would silently keep the last) and excessive nesting, with a path.
class StrictParseGuard {
 public:
  explicit StrictParseGuard(const std::string& file) : file_(file) {}

  bool operator()(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        element();
        if (depth >= kMaxJsonDepth)
          throw InputError(file_, path(),
                           fmt::format("nesting deeper than {} levels", kMaxJsonDepth));
        frames_.push_back(Frame{event == E::object_start, {}, {}, -1});
        break;
      case E::key: {
        auto& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw InputError(file_, path(), "duplicate key");
        break;
      }
      case E::value:
        element();
        break;
      case E::object_end:
      case E::array_end:
        frames_.pop_back();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    long index;
  };
  void element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string path() const {
    std::string out;
    for (const auto& f : frames_) {
      if (f.object) {
        if (!f.key.empty()) out += (out.empty() ? "" : ".") + f.key;
      } else if (f.index >= 0) {
        out += fmt::format("[{}]", f.index);
      }
    }
    return out;
  }
  const std::string& file_;
  std::vector<Frame> frames_;
};

std::string without_nlohmann_prefix(std::string what) {
  // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
  if (!what.empty() && what[0] == '[') {
    const auto close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  return what;
}

}  // namespace

nlohmann::json parse_strict_json(std::string_view text, const std::string& file) {
  StrictParseGuard guard(file);
  try {
    return nlohmann::json::parse(
        text.begin(), text.end(),
        [&guard](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return guard(depth, event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file, "", "invalid JSON: " + without_nlohmann_prefix(e.what()));
  }
}

}  // namespace mlsim
