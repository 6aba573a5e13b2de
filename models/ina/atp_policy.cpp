#include "models/ina/atp_policy.hpp"

#include "sim_core/engine/random.hpp"

namespace mlsim::ina {

std::size_t AtpPolicy::index_of(std::uint16_t job, std::uint64_t seq) const {
  // ATP hashes (appID, seq) with CRC (HashNew_crc); any well-mixed hash behaves the same here.
  return static_cast<std::size_t>(mix64((static_cast<std::uint64_t>(job) << 48) ^ seq) %
                                  pool_.size());
}

void AtpPolicy::fall_back(const Packet& p) {
  Packet q = p;
  q.fell_back = true;
  ports_.counters().fallback_packets += p.packets;
  ports_.to_ps(q);
}

void AtpPolicy::claim_and_add(std::size_t index, const Packet& p) {
  pool_.claim(index, claim_of(p), ports_.now());
  add(index, p);
}

void AtpPolicy::add(std::size_t index, const Packet& p) {
  ports_.counters().aggregated_packets += p.packets;
  if (!pool_.add(index, p.job, p.seq, p.bitmap, p.sum, ports_.full_of(p.job), ports_.now())) return;
  ports_.to_ps(packet_of(pool_.at(index), PacketKind::kPartial));
}

void AtpPolicy::flush(std::size_t index, bool evicted) {
  const Aggregator& a = pool_.at(index);
  if (!a.complete) {
    Packet out = packet_of(a, PacketKind::kPartial);  // as wide as the chunk
    out.evicted = evicted;
    auto& c = ports_.counters();
    (evicted ? c.evicted_partial_packets : c.flushed_partial_packets) += out.packets;
    ports_.to_ps(out);
  }
  pool_.release(index, ports_.now());
}

void AtpPolicy::on_gradient(const Packet& p) {
  const std::size_t i = index_of(p.job, p.seq);
  const Aggregator& a = pool_.at(i);
  if (p.resend) {
    if (a.owned_by(p.job, p.seq)) flush(i, /*evicted=*/false);
    fall_back(p);
    return;
  }
  if (!a.held) {
    claim_and_add(i, p);
  } else if (a.owned_by(p.job, p.seq)) {
    if (a.bitmap & p.bitmap)
      fall_back(p);  // a copy of a contribution already added: let the PS discard it
    else
      add(i, p);
  } else {
    ports_.counters().collision_packets += p.packets;
    on_collision(i, p);
  }
}

void AtpPolicy::on_collision(std::size_t, const Packet& p) {
  fall_back(p);
}

void AtpPolicy::on_result(const Packet& p) {
  const std::size_t i = index_of(p.job, p.seq);
  if (pool_.at(i).owned_by(p.job, p.seq)) pool_.release(i, ports_.now());
  ports_.multicast(p);
}

}  // namespace mlsim::ina
