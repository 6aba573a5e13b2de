#include "models/ina/parameter_server.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

ParameterServer::ParameterServer(std::uint16_t job, int workers, bool selective,
                                 bool answer_late_resends, Send send, InaCounters& counters)
    : job_(job),
      workers_(workers),
      full_(full_bitmap(workers)),
      selective_(selective),
      answer_late_(answer_late_resends),
      send_(std::move(send)),
      counters_(counters) {}

void ParameterServer::on_packet(const Packet& p) {
  MLSIM_CHECK(p.job == job_, "packet delivered to another job's PS");
  ++counters_.ps_packets_in;
  if (finished(p.seq)) {
    ++counters_.ps_late_duplicates;
    if (answer_late_ && p.kind == PacketKind::kGradient && p.resend) {
      Packet r;
      r.kind = PacketKind::kResult;
      r.job = job_;
      r.seq = p.seq;
      r.sum = result_sum_[p.seq];
      r.bitmap = full_;
      r.packets = p.packets;
      r.worker = p.worker;
      r.resend = true;
      ++counters_.result_reanswers;
      send_(r);
    }
    return;
  }
  Open& o = open_[p.seq];
  if (o.bitmap & p.bitmap) {
    MLSIM_CHECK(p.kind == PacketKind::kGradient,
                "an aggregate overlapping the PS's partial would count a worker twice");
    ++counters_.ps_late_duplicates;  // a resent fragment the PS already has
    return;
  }
  o.bitmap |= p.bitmap;
  o.sum += p.sum;
  o.packets = p.packets;
  o.ecn = o.ecn || p.ecn;
  if (o.bitmap == full_) {
    Open copy = o;
    open_.erase(p.seq);
    complete(p.seq, copy);
    return;
  }
  if (p.evicted && selective_) {
    const std::uint32_t missing = full_ & ~o.bitmap & ~o.requested;
    for (int w = 0; w < workers_; ++w) {
      if (!(missing & (1u << w))) continue;
      Packet r;
      r.kind = PacketKind::kResendRequest;
      r.job = job_;
      r.seq = p.seq;
      r.worker = static_cast<std::uint16_t>(w);
      send_(r);
      ++counters_.resend_requests;
    }
    o.requested |= missing;
  }
}

void ParameterServer::complete(std::uint64_t seq, const Open& o) {
  if (done_.size() <= seq) done_.resize(std::max<std::size_t>(seq + 1, done_.size() * 2));
  done_[seq] = true;
  if (answer_late_) {
    if (result_sum_.size() < done_.size()) result_sum_.resize(done_.size());
    result_sum_[seq] = o.sum;
  }
  Packet r;
  r.kind = PacketKind::kResult;
  r.job = job_;
  r.seq = seq;
  r.sum = o.sum;
  r.bitmap = o.bitmap;
  r.packets = o.packets;
  r.ecn = o.ecn;
  send_(r);
}

}  // namespace mlsim::ina
