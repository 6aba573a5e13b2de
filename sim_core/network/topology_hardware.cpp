#include "sim_core/network/topology_hardware.hpp"

#include <fmt/format.h>

#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_spec.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

HardwareChoice read_choice(JsonReader& r, const HardwareCatalog& catalog, bool top_level) {
  HardwareChoice c;
  c.path = r.path();
  if (r.has("gpu")) {
    c.gpu = r.string("gpu");
    catalog.gpu(*c.gpu, r.path_of("gpu"));
  }
  if (r.has("gpus_per_host"))
    c.gpus_per_host = static_cast<int>(r.integer("gpus_per_host", 1, 1024));
  if (r.has("nic")) {
    c.nic = r.string("nic");
    catalog.nic(*c.nic, r.path_of("nic"));
  }
  if (r.has("switch")) {
    c.switch_spec = r.string("switch");
    catalog.switch_spec(*c.switch_spec, r.path_of("switch"));
  }
  if (auto intra = r.optional_object("intra_node")) {
    if (intra->has("fabric"))
      c.intra_fabric = parse_intra_node_fabric(intra->string("fabric"), intra->path_of("fabric"));
    if (intra->has("bandwidth")) c.intra_bandwidth = intra->bandwidth("bandwidth");
    if (intra->has("latency")) c.intra_latency = intra->duration("latency");
    intra->finish();
  }
  if (top_level && !c.gpu)
    throw InputError(r.path_of("gpu"),
                     "missing (required: the GPU of every host, which groups may override)");
  return c;
}

void apply(const HardwareChoice& from, HardwareChoice& to) {
  if (from.gpu) to.gpu = from.gpu;
  if (from.gpus_per_host) to.gpus_per_host = from.gpus_per_host;
  if (from.nic) to.nic = from.nic;
  if (from.switch_spec) to.switch_spec = from.switch_spec;
  if (from.intra_fabric) to.intra_fabric = from.intra_fabric;
  if (from.intra_bandwidth) to.intra_bandwidth = from.intra_bandwidth;
  if (from.intra_latency) to.intra_latency = from.intra_latency;
}

}  // namespace

TopologyHardwareSpec parse_topology_hardware(JsonReader& topology, const TopologySpec& spec,
                                             const HardwareCatalog& catalog) {
  TopologyHardwareSpec out;
  auto hw_opt = topology.optional_object("hardware");
  if (!hw_opt) return out;
  auto& hw = *hw_opt;
  out.present = true;
  out.defaults = read_choice(hw, catalog, true);
  const bool leaf_spine = std::holds_alternative<LeafSpineSpec>(spec);
  const bool fat_tree = std::holds_alternative<FatTreeSpec>(spec);
  if (hw.has("groups")) {
    for (auto& g : hw.objects("groups")) {
      HardwareGroup group;
      int selectors = 0;
      if (g.has("hosts")) {
        ++selectors;
        group.selector = HardwareGroup::Selector::kHosts;
        group.indices = g.integers("hosts", 0, kMaxHosts);
      }
      if (g.has("leaves")) {
        ++selectors;
        if (!leaf_spine)
          throw InputError(g.path_of("leaves"),
                           "\"leaves\" selects hosts of a leaf_spine topology");
        group.selector = HardwareGroup::Selector::kLeaves;
        group.indices = g.integers("leaves", 0, kMaxHosts);
      }
      if (g.has("pods")) {
        ++selectors;
        if (!fat_tree)
          throw InputError(g.path_of("pods"), "\"pods\" selects hosts of a fat_tree topology");
        group.selector = HardwareGroup::Selector::kPods;
        group.indices = g.integers("pods", 0, kMaxFatTreeK);
      }
      if (g.has("nodes")) {
        ++selectors;
        group.selector = HardwareGroup::Selector::kNodes;
        group.names = g.strings("nodes");
      }
      if (selectors != 1)
        throw InputError(g.path(),
                         "expected exactly one of \"hosts\", \"leaves\", \"pods\" or "
                         "\"nodes\" to select what the group applies to");
      group.choice = read_choice(g, catalog, false);
      if (group.choice.switch_spec && group.selector == HardwareGroup::Selector::kHosts)
        throw InputError(g.path_of("switch"),
                         "a group selecting \"hosts\" has no switches; select \"leaves\", "
                         "\"pods\" or \"nodes\"");
      g.finish();
      out.groups.push_back(std::move(group));
    }
  } else {
    hw.ignore("groups");
  }
  hw.finish();
  return out;
}

NodeHardware build_node_hardware(const Topology& topology, const TopologySpec& spec,
                                 const TopologyHardwareSpec& hw, const HardwareCatalog& catalog) {
  if (!hw.present) return {};
  const std::size_t n = topology.nodes().size();
  std::vector<HardwareChoice> choice(n, hw.defaults);
  std::vector<std::string> where(n, hw.defaults.path);
  const auto& hosts = topology.hosts();

  auto select = [&](const HardwareGroup& g) {
    std::vector<NodeId> nodes;
    auto check_index = [&](std::int64_t i, std::int64_t count, const char* what) {
      if (i >= count)
        throw InputError(g.choice.path,
                         fmt::format("{} {} does not exist (the topology has {})", what, i, count));
    };
    switch (g.selector) {
      case HardwareGroup::Selector::kHosts:
        for (auto i : g.indices) {
          check_index(i, static_cast<std::int64_t>(hosts.size()), "host");
          nodes.push_back(hosts[static_cast<std::size_t>(i)]);
        }
        break;
      case HardwareGroup::Selector::kLeaves: {
        const auto& ls = std::get<LeafSpineSpec>(spec);
        for (auto leaf : g.indices) {
          check_index(leaf, ls.leaves, "leaf");
          for (int h = 0; h < ls.hosts_per_leaf; ++h)
            nodes.push_back(hosts[static_cast<std::size_t>(leaf * ls.hosts_per_leaf + h)]);
          nodes.push_back(*topology.find("leaf" + std::to_string(leaf)));
        }
        break;
      }
      case HardwareGroup::Selector::kPods: {
        const auto& ft = std::get<FatTreeSpec>(spec);
        const int half = ft.k / 2;
        for (auto pod : g.indices) {
          check_index(pod, ft.k, "pod");
          for (int h = 0; h < half * half; ++h)
            nodes.push_back(hosts[static_cast<std::size_t>(pod * half * half + h)]);
          for (int i = 0; i < half; ++i) {
            const auto suffix = std::to_string(pod) + "_" + std::to_string(i);
            nodes.push_back(*topology.find("edge" + suffix));
            nodes.push_back(*topology.find("agg" + suffix));
          }
        }
        break;
      }
      case HardwareGroup::Selector::kNodes:
        for (const auto& name : g.names) {
          auto id = topology.find(name);
          if (!id) throw InputError(g.choice.path, fmt::format("no node named \"{}\"", name));
          nodes.push_back(*id);
        }
        break;
    }
    return nodes;
  };
  for (const auto& g : hw.groups)
    for (NodeId node : select(g)) {
      apply(g.choice, choice[node]);
      where[node] = g.choice.path;
    }

  NodeHardware view(n);
  for (NodeId node = 0; node < n; ++node) {
    const auto& c = choice[node];
    const Node& info = topology.node(node);
    if (info.kind == NodeKind::kSwitch) {
      if (!c.switch_spec) continue;
      const SwitchSpec& sw = catalog.switch_spec(*c.switch_spec, where[node]);
      const auto ports = topology.out_links(node).size();
      if (ports > static_cast<std::size_t>(sw.ports))
        throw InputError(where[node] + ".switch",
                         fmt::format("switch {} has {} links but \"{}\" has {} ports", info.name,
                                     ports, sw.name, sw.ports));
      view.set_switch(node, &sw);
      continue;
    }
    HostHardware h;
    h.gpu = &catalog.gpu(*c.gpu, where[node] + ".gpu");
    h.gpus = c.gpus_per_host.value_or(1);
    if (c.nic) {
      h.nic = &catalog.nic(*c.nic, where[node] + ".nic");
      for (LinkId l : topology.out_links(node))
        if (topology.link(l).bandwidth.bytes_per_s > h.nic->bandwidth.bytes_per_s * (1 + 1e-12))
          throw InputError(where[node] + ".nic",
                           fmt::format("host {} has a {:g} Gbps link but NIC \"{}\" runs at {:g} "
                                       "Gbps",
                                       info.name, topology.link(l).bandwidth.bytes_per_s * 8e-9,
                                       h.nic->name, h.nic->bandwidth.bytes_per_s * 8e-9));
    }
    h.intra_node = h.gpu->intra_node;
    if (c.intra_fabric || c.intra_bandwidth || c.intra_latency) {
      if (!h.intra_node && !(c.intra_fabric && c.intra_bandwidth && c.intra_latency))
        throw InputError(where[node] + ".intra_node",
                         fmt::format("GPU \"{}\" has no intra_node link in the catalog: give "
                                     "\"fabric\", \"bandwidth\" and \"latency\"",
                                     h.gpu->name));
      IntraNodeLink link = h.intra_node.value_or(IntraNodeLink{});
      if (c.intra_fabric) link.fabric = *c.intra_fabric;
      if (c.intra_bandwidth) link.bandwidth = *c.intra_bandwidth;
      if (c.intra_latency) link.latency = *c.intra_latency;
      link.source = "scenario override (" + where[node] + ".intra_node)";
      h.intra_node = std::move(link);
    } else if (h.gpus > 1 && !h.intra_node) {
      throw InputError(where[node] + ".gpus_per_host",
                       fmt::format("{} GPUs per host need a link between them: GPU \"{}\" has no "
                                   "intra_node entry in the catalog; set intra_node",
                                   h.gpus, h.gpu->name));
    }
    view.set_host(node, std::move(h));
  }
  return view;
}

void reject_moved_to_topology_hardware(JsonReader& section, std::string_view key,
                                       std::string_view what) {
  if (!section.has(key)) return;
  throw InputError(section.path_of(key),
                   fmt::format("moved: {} (the topology's \"hardware\": {{\"gpu\": ...}}, with "
                               "groups for hosts with other GPUs; docs/scenario.md, "
                               "\"topology.hardware\")",
                               what));
}

}  // namespace mlsim
