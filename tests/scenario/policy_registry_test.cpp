// PolicyRegistry (sim_core/run/policy_registry.hpp): choosing by name from a scenario, defaults
// written back, unknown names as InputErrors that list the registered ones; and every policy the
// program's models register is listed with a kind and a description.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include "cli/registry.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/run/policy_registry.hpp"

using namespace mlsim;

namespace {

struct Shape {
  virtual ~Shape() = default;
  virtual int sides() const = 0;
};
struct Triangle : Shape {
  int sides() const override { return 3; }
};
struct Square : Shape {
  int sides() const override { return 4; }
};
using ShapeFactory = std::function<std::unique_ptr<Shape>()>;

PolicyRegistry<ShapeFactory> shapes() {
  PolicyRegistry<ShapeFactory> r("shape");
  r.add("triangle", "three sides", [] {
     return std::make_unique<Triangle>();
   }).add("square", "four sides", [] { return std::make_unique<Square>(); });
  return r;
}

}  // namespace

TEST(PolicyRegistry, ChoosesTheNamedFactory) {
  const auto r = shapes();
  nlohmann::json system = {{"shape", "square"}};
  JsonReader reader(system, "system");
  EXPECT_EQ(r.choose(reader, "shape").value()->sides(), 4);
  reader.finish();  // the key counts as read
  EXPECT_EQ(r.get("triangle", "here").value()->sides(), 3);
}

TEST(PolicyRegistry, ADefaultIsWrittenBack) {
  const auto r = shapes();
  nlohmann::json system = nlohmann::json::object();
  JsonReader reader(system, "system");
  EXPECT_EQ(r.choose_or(reader, "shape", "triangle").name, "triangle");
  EXPECT_EQ(system["shape"], "triangle");
}

TEST(PolicyRegistry, AnUnknownNameIsAnInputErrorListingTheRegisteredOnes) {
  const auto r = shapes();
  nlohmann::json system = {{"shape", "circle"}};
  JsonReader reader(system, "system");
  try {
    (void)r.choose(reader, "shape");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "system.shape: unknown shape \"circle\" (registered: \"triangle\", \"square\")");
  }
  nlohmann::json wrong_type = {{"shape", 3}};
  JsonReader typed(wrong_type, "system");
  EXPECT_THROW((void)r.choose(typed, "shape"), InputError);
}

TEST(PolicyRegistry, ANameRegisteredTwiceIsAProgrammingError) {
  auto r = shapes();
  EXPECT_THROW(r.add("square", "again", [] { return std::make_unique<Square>(); }), InvariantError);
}

TEST(PolicyRegistry, EveryModelListsItsPoliciesWithKindAndDescription) {
  const Registries registries = make_registries();
  for (const ModelInfo& m : registries.models.all()) {
    EXPECT_FALSE(m.policies.empty()) << m.name;
    std::set<std::pair<std::string, std::string>> seen;
    for (const PolicyInfo& p : m.policies) {
      EXPECT_FALSE(p.kind.empty()) << m.name << " " << p.name;
      EXPECT_FALSE(p.name.empty()) << m.name;
      EXPECT_FALSE(p.description.empty()) << m.name << " " << p.name;
      EXPECT_TRUE(seen.insert({p.kind, p.name}).second) << m.name << ": " << p.name << " twice";
    }
  }
}
