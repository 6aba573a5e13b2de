#include "sim_core/run/compute_section.hpp"

#include <fmt/format.h>

#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

std::filesystem::path resolve(const std::filesystem::path& dir, const std::string& p) {
  std::filesystem::path path(p);
  return path.is_absolute() ? path : dir / path;
}

}  // namespace

std::shared_ptr<const CostModel> parse_compute_section(JsonReader& r,
                                                       const HardwareCatalog& catalog,
                                                       const std::filesystem::path& dir) {
  auto model = std::make_shared<CostModel>();
  const auto providers = r.strings("providers");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < providers.size(); ++i) {
    const auto& name = providers[i];
    const auto where = r.path_of("providers") + fmt::format("[{}]", i);
    if (!seen.insert(name).second) throw InputError(where, "provider listed twice");
    if (name == "roofline") {
      if (!r.has("roofline"))
        throw InputError(r.path_of("roofline"),
                         "missing (the \"roofline\" provider needs its calibration file)");
      const auto file = resolve(dir, r.string("roofline"));
      try {
        model->add(RooflineProvider::load(file));
      } catch (const InputError& e) {
        throw InputError(r.path_of("roofline"), e.what());
      }
    } else if (name == "profiles") {
      auto p = r.object("profiles");
      const auto vidur = resolve(dir, p.string("vidur"));
      std::map<std::string, std::string> folders;
      auto& gpus = p.raw("gpus");
      if (!gpus.is_object() || gpus.empty())
        throw InputError(p.path_of("gpus"),
                         "expected an object mapping profile folders to catalog GPUs");
      for (auto it = gpus.begin(); it != gpus.end(); ++it) {
        const auto gpu_where = p.path_of("gpus") + "." + it.key();
        if (!it.value().is_string()) throw InputError(gpu_where, "expected a catalog GPU name");
        const auto gpu = it.value().get<std::string>();
        catalog.gpu(gpu, gpu_where);
        folders[it.key()] = gpu;
      }
      p.finish();
      model->add(ProfileTableProvider::load_vidur(vidur, folders, r.path_of("profiles")));
    } else {
      throw InputError(where,
                       fmt::format("expected \"profiles\" or \"roofline\", got \"{}\"", name));
    }
  }
  for (const char* key : {"roofline", "profiles"})
    if (!seen.count(key) && r.has(key))
      throw InputError(r.path_of(key), fmt::format("\"{}\" is not among the providers", key));
    else if (!seen.count(key))
      r.ignore(key);
  if (r.has("scale_from")) {
    const auto& gpu = catalog.gpu(r.string("scale_from"), r.path_of("scale_from"));
    model->set_scale_from(&gpu);
  } else {
    r.ignore("scale_from");
  }
  r.finish();
  return model;
}

}  // namespace mlsim
