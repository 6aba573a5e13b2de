#include "models/serving/model_catalog.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::serving {

int TransformerShape::dtype_bytes() const {
  switch (dtype) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return 4;
    case Dtype::kFp16:
    case Dtype::kBf16:
      return 2;
    case Dtype::kFp8:
      return 1;
  }
  MLSIM_CHECK(false, "unknown dtype");
}

namespace {
std::int64_t layer_params(const TransformerShape& m, int experts_counted) {
  const std::int64_t h = m.hidden, kv = m.kv_dim();
  const std::int64_t attention = h * (h + 2 * kv) + h * h;  // QKV, then O
  const std::int64_t norms = 2 * h;
  if (!m.moe()) return attention + 3 * h * m.ffn + norms;  // gate, up, down
  // Mixtral-8x7B: 41.9 M attention + 8 x 176.2 M experts + 32,768 router + 8,192 norms =
  // 1,451.3 M per layer; x 32 layers + 262.1 M embedding and head = 46.70 B (the paper's 46.7 B;
  // active: 2 experts, 12.88 B, the paper's 12.9 B).
  const std::int64_t expert = 3 * h * m.expert_ffn;
  return attention + experts_counted * expert + h * m.experts + norms;
}
}  // namespace

std::int64_t TransformerShape::params_per_layer() const {
  return layer_params(*this, experts);
}

std::int64_t TransformerShape::active_params_per_layer() const {
  return layer_params(*this, experts_per_token);
}

std::int64_t TransformerShape::params_outside_layers() const {
  return 2 * std::int64_t{vocab} * hidden + hidden;
}

TransformerShape parse_transformer_shape(JsonReader& r, const std::string& name) {
  TransformerShape s;
  s.name = name;
  s.source = r.string("_source");
  if (s.source.empty()) throw InputError(r.path_of("_source"), "expected a non-empty source");
  s.layers = static_cast<int>(r.integer("layers", 1, 1000));
  s.hidden = static_cast<int>(r.integer("hidden", 1, 1 << 20));
  s.heads = static_cast<int>(r.integer("heads", 1, 1 << 12));
  s.kv_heads = static_cast<int>(r.integer("kv_heads", 1, 1 << 12));
  s.ffn = static_cast<int>(r.integer("ffn", 1, 1 << 22));
  s.vocab = static_cast<int>(r.integer("vocab", 1, 1 << 24));
  s.context = static_cast<std::int32_t>(r.integer("context", 1, 1 << 30));
  s.dtype = parse_dtype(r.string_or("dtype", "fp16"), r.path_of("dtype"));
  if (r.has("experts") || r.has("experts_per_token") || r.has("expert_ffn")) {
    s.experts = static_cast<int>(r.integer("experts", 2, 1 << 16));
    s.experts_per_token = static_cast<int>(r.integer("experts_per_token", 1, s.experts));
    s.expert_ffn = static_cast<int>(r.integer("expert_ffn", 1, 1 << 22));
  }
  if (s.hidden % s.heads != 0)
    throw InputError(r.path_of("heads"), fmt::format("hidden ({}) must be a multiple of heads ({})",
                                                     s.hidden, s.heads));
  if (s.heads % s.kv_heads != 0)
    throw InputError(
        r.path_of("kv_heads"),
        fmt::format("heads ({}) must be a multiple of kv_heads ({})", s.heads, s.kv_heads));
  r.finish();
  return s;
}

ModelCatalog ModelCatalog::load(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file, "", "model catalog");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file.string(), std::string("invalid JSON: ") + e.what());
  }
  JsonReader root(j, file.string());
  auto& models = root.raw("models");
  if (!models.is_object())
    throw InputError(root.path_of("models"), "expected an object of named models");
  ModelCatalog catalog;
  for (auto it = models.begin(); it != models.end(); ++it) {
    if (it.key().empty() || it.key()[0] == '_') continue;
    JsonReader entry(it.value(), root.path_of("models") + "." + it.key());
    catalog.add(parse_transformer_shape(entry, it.key()));
  }
  root.finish();
  return catalog;
}

void ModelCatalog::add(TransformerShape shape) {
  auto name = shape.name;
  if (!models_.emplace(name, std::move(shape)).second)
    throw InputError(name, "model defined twice in the catalog");
}

const TransformerShape* ModelCatalog::find(std::string_view name) const {
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : &it->second;
}

const TransformerShape& ModelCatalog::get(std::string_view name, const std::string& where) const {
  if (const auto* s = find(name)) return *s;
  std::string known;
  for (const auto& [n, _] : models_) known += (known.empty() ? "" : ", ") + n;
  throw InputError(where, fmt::format("unknown model \"{}\"; the catalog has: {}", name, known));
}

}  // namespace mlsim::serving
