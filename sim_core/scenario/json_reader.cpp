#include "sim_core/scenario/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim {

std::string json_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return fmt::format("the string {}", v.dump());
    case nlohmann::json::value_t::boolean:
      return fmt::format("the boolean {}", v.dump());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return fmt::format("the number {}", v.dump());
    default:
      return "an unsupported value";
  }
}

JsonReader::JsonReader(nlohmann::json& j, std::string path) : j_(&j), path_(std::move(path)) {
  if (!j.is_object())
    throw InputError(path_.empty() ? "(root)" : path_,
                     "expected an object, got " + json_type_name(j));
}

std::string JsonReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool JsonReader::has(std::string_view key) const {
  return j_->contains(key);
}

void JsonReader::fail(std::string_view key, const std::string& what) const {
  throw InputError(path_of(key), what);
}

std::string JsonReader::type_name(const nlohmann::json& v) const {
  return json_type_name(v);
}

nlohmann::json& JsonReader::at(std::string_view key) {
  read_.emplace(key);
  auto it = j_->find(key);
  if (it == j_->end()) fail(key, "missing (required)");
  return *it;
}

nlohmann::json& JsonReader::raw(std::string_view key) {
  return at(key);
}
void JsonReader::ignore(std::string_view key) {
  read_.emplace(key);
}

JsonReader JsonReader::object(std::string_view key) {
  return JsonReader(at(key), path_of(key));
}

std::optional<JsonReader> JsonReader::optional_object(std::string_view key) {
  read_.emplace(key);
  if (!has(key)) return std::nullopt;
  return JsonReader(at(key), path_of(key));
}

JsonReader JsonReader::object_or_empty(std::string_view key) {
  read_.emplace(key);
  if (!has(key)) (*j_)[std::string(key)] = nlohmann::json::object();
  return JsonReader(at(key), path_of(key));
}

std::vector<JsonReader> JsonReader::objects(std::string_view key) {
  auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array of objects, got " + type_name(v));
  std::vector<JsonReader> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out.emplace_back(v[i], fmt::format("{}[{}]", path_of(key), i));
  return out;
}

std::string JsonReader::string(std::string_view key) {
  auto& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

std::string JsonReader::string_or(std::string_view key, const std::string& def) {
  if (!has(key)) {
    read_.emplace(key);
    (*j_)[std::string(key)] = def;
    return def;
  }
  return string(key);
}

std::string JsonReader::choice(std::string_view key,
                               std::initializer_list<std::string_view> allowed) {
  return choice(key, std::vector<std::string>(allowed.begin(), allowed.end()));
}

std::string JsonReader::choice(std::string_view key, const std::vector<std::string>& allowed) {
  auto& v = at(key);
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  if (!v.is_string()) fail(key, fmt::format("expected one of {}, got {}", list, type_name(v)));
  auto s = v.get<std::string>();
  for (const auto& a : allowed)
    if (a == s) return s;
  fail(key, fmt::format("expected one of {}, got \"{}\"", list, s));
}

std::string JsonReader::choice_or(std::string_view key,
                                  std::initializer_list<std::string_view> allowed,
                                  const std::string& def) {
  if (!has(key)) {
    read_.emplace(key);
    (*j_)[std::string(key)] = def;
    return def;
  }
  return choice(key, allowed);
}

std::int64_t JsonReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  auto& v = at(key);
  std::int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, v.dump()));
  } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
             std::fabs(v.get<double>()) < 9e15) {
    x = static_cast<std::int64_t>(v.get<double>());
  } else {
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, type_name(v)));
  }
  if (x < min || x > max)
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, x));
  return x;
}

std::int64_t JsonReader::integer_or(std::string_view key, std::int64_t def, std::int64_t min,
                                    std::int64_t max) {
  if (!has(key)) {
    read_.emplace(key);
    (*j_)[std::string(key)] = def;
    return def;
  }
  return integer(key, min, max);
}

double JsonReader::number(std::string_view key, double min, double max) {
  auto& v = at(key);
  if (!v.is_number())
    fail(key, fmt::format("expected a number in [{}, {}], got {}", min, max, type_name(v)));
  double x = v.get<double>();
  if (!(x >= min && x <= max))
    fail(key, fmt::format("expected a number in [{}, {}], got {}", min, max, v.dump()));
  return x;
}

double JsonReader::number_or(std::string_view key, double def, double min, double max) {
  if (!has(key)) {
    read_.emplace(key);
    (*j_)[std::string(key)] = def;
    return def;
  }
  return number(key, min, max);
}

bool JsonReader::boolean(std::string_view key) {
  auto& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + type_name(v));
  return v.get<bool>();
}

bool JsonReader::boolean_or(std::string_view key, bool def) {
  if (!has(key)) {
    read_.emplace(key);
    (*j_)[std::string(key)] = def;
    return def;
  }
  return boolean(key);
}

namespace {
template <typename F>
auto quantity(JsonReader& r, nlohmann::json& v, std::string_view key, const char* what, F parse) {
  if (!v.is_string())
    throw InputError(r.path_of(key), fmt::format("expected {} as a string with a unit, got {}",
                                                 what, json_type_name(v)));
  return parse(v.get<std::string>(), r.path_of(key));
}
}  // namespace

Bytes JsonReader::bytes(std::string_view key) {
  const auto b = quantity(*this, at(key), key, "a size", parse_bytes);
  if (b > kMaxInputBytes)
    fail(key, fmt::format("a size must be at most 1PiB ({} bytes), got {}", kMaxInputBytes.count,
                          at(key).get<std::string>()));
  return b;
}
Bytes JsonReader::bytes_or(std::string_view key, const std::string& def) {
  if (!has(key)) (*j_)[std::string(key)] = def;
  return bytes(key);
}
Bandwidth JsonReader::bandwidth(std::string_view key) {
  auto bw = quantity(*this, at(key), key, "a bandwidth", parse_bandwidth);
  if (!(bw.bits_per_s() >= kMinInputBandwidthBitsPerS))
    fail(key, fmt::format("a bandwidth must be at least 1Kbps (a zero or slower link would take "
                          "years per message; to cut a link, fail it instead), got {}",
                          at(key).get<std::string>()));
  return bw;
}
Bandwidth JsonReader::bandwidth_or(std::string_view key, const std::string& def) {
  if (!has(key)) (*j_)[std::string(key)] = def;
  return bandwidth(key);
}
Time JsonReader::duration(std::string_view key) {
  const auto t = quantity(*this, at(key), key, "a duration", parse_time);
  if (t > kMaxInputDuration)
    fail(key, fmt::format("a duration must be at most 10 years (87600h), got {}",
                          at(key).get<std::string>()));
  return t;
}
Time JsonReader::duration_or(std::string_view key, const std::string& def) {
  if (!has(key)) (*j_)[std::string(key)] = def;
  return duration(key);
}
FlopRate JsonReader::flop_rate(std::string_view key) {
  auto r = quantity(*this, at(key), key, "a compute rate", parse_flop_rate);
  if (!(r.flops_per_s >= kMinInputFlopsPerS))
    fail(key, fmt::format("a compute rate must be at least 1MFLOPS, got {}",
                          at(key).get<std::string>()));
  return r;
}

std::vector<double> JsonReader::numbers(std::string_view key, double min, double max) {
  auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array of numbers, got " + type_name(v));
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || !(v[i].get<double>() >= min && v[i].get<double>() <= max))
      throw InputError(
          fmt::format("{}[{}]", path_of(key), i),
          fmt::format("expected a number in [{}, {}], got {}", min, max, type_name(v[i])));
    out.push_back(v[i].get<double>());
  }
  return out;
}

std::vector<std::int64_t> JsonReader::integers(std::string_view key, std::int64_t min,
                                               std::int64_t max) {
  auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array of integers, got " + type_name(v));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < min ||
        v[i].get<std::int64_t>() > max)
      throw InputError(
          fmt::format("{}[{}]", path_of(key), i),
          fmt::format("expected an integer in [{}, {}], got {}", min, max, type_name(v[i])));
    out.push_back(v[i].get<std::int64_t>());
  }
  return out;
}

std::vector<std::string> JsonReader::strings(std::string_view key) {
  auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array of strings, got " + type_name(v));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      throw InputError(fmt::format("{}[{}]", path_of(key), i),
                       "expected a string, got " + type_name(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

void JsonReader::finish() {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    const std::string& k = it.key();
    if (read_.count(k) || k == "comment" || (!k.empty() && k[0] == '_')) continue;
    std::string known;
    for (const auto& r : read_) known += (known.empty() ? "" : ", ") + r;
    fail(k, fmt::format("unknown key (known keys here: {})", known.empty() ? "none" : known));
  }
}

void JsonReader::only_keys(std::initializer_list<std::string_view> known) const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    const std::string& k = it.key();
    if (k == "comment" || (!k.empty() && k[0] == '_')) continue;
    if (std::find(known.begin(), known.end(), std::string_view(k)) != known.end()) continue;
    std::string list;
    for (const auto& n : known) list += (list.empty() ? "" : ", ") + std::string(n);
    fail(k, fmt::format("unknown key (known keys here: {})", list));
  }
}

}  // namespace mlsim
