#pragma once
// Transformer shapes (decoder-only, Llama-style: RMSNorm, rotary embeddings, gated SiLU MLP,
// optional grouped-query attention) and the catalog that names them.
//
// Shapes come from workloads/models/*.json; every entry carries a "_source". The derived
// quantities (parameters, weight bytes, KV bytes per token) are computed here once so that the
// cost model, the KV cache and the memory metrics all agree.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <string_view>

#include "sim_core/hardware/hardware.hpp"

namespace mlsim {
class JsonReader;
}

namespace mlsim::serving {

struct TransformerShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // == heads for multi-head attention, fewer for grouped-query attention
  int ffn = 0;       // intermediate size of the gated MLP
  int vocab = 0;
  // Longest sequence (prompt plus output tokens) the model serves: config.json's
  // max_position_embeddings. Catalog entries must give it; shapes built in code have no limit.
  std::int32_t context = std::numeric_limits<std::int32_t>::max();
  Dtype dtype = Dtype::kFp16;
  std::string source;
  // Mixture of experts (experts 0: a dense model). Every decoder layer's MLP is then `experts`
  // gated MLPs of width `expert_ffn`, and a router (a hidden x experts linear layer) sends each
  // token to `experts_per_token` of them (top-k), whose outputs are summed; `ffn` is unused.
  // (Mixtral's shape; models with some dense layers or shared experts are not described.)
  int experts = 0;
  int experts_per_token = 0;
  int expert_ffn = 0;
  bool moe() const { return experts > 0; }

  int head_dim() const { return hidden / heads; }
  // Width of K (or V) for one token: kv_heads * head_dim.
  int kv_dim() const { return kv_heads * head_dim(); }
  int dtype_bytes() const;

  // Parameters of one decoder layer: Q,K,V,O projections, gate/up/down MLP (MoE: every expert's
  // and the router), two RMSNorm scales.
  std::int64_t params_per_layer() const;
  // Of those, what one token uses (MoE: the router and its experts_per_token experts; dense: all).
  std::int64_t active_params_per_layer() const;
  // Embedding table plus LM head (untied in Llama 2) plus the final norm.
  std::int64_t params_outside_layers() const;
  std::int64_t params() const { return params_per_layer() * layers + params_outside_layers(); }
  std::int64_t weight_bytes() const { return params() * dtype_bytes(); }
  // K and V of one token in one layer (the whole model width, before tensor-parallel split).
  std::int64_t kv_bytes_per_token_layer() const {
    return std::int64_t{2} * kv_dim() * dtype_bytes();
  }
};

// Reads one entry (the object under "models"); `name` is its key. Strict: unknown keys and
// inconsistent shapes (hidden not divisible by heads, heads not divisible by kv_heads) are
// InputErrors.
TransformerShape parse_transformer_shape(JsonReader& entry, const std::string& name);

class ModelCatalog {
 public:
  // Reads {"models": {NAME: {...}}} from a file; InputError naming the file on any problem.
  static ModelCatalog load(const std::filesystem::path& file);
  void add(TransformerShape shape);
  const TransformerShape* find(std::string_view name) const;
  // InputError at `where` listing the known names when absent.
  const TransformerShape& get(std::string_view name, const std::string& where) const;
  const std::map<std::string, TransformerShape, std::less<>>& all() const { return models_; }

 private:
  std::map<std::string, TransformerShape, std::less<>> models_;
};

}  // namespace mlsim::serving
