#include "sched/lower.hpp"

#include <algorithm>

namespace braid::sched {

namespace {
constexpr const char* kOpNames[] = {"RECV_F", "F", "SEND_F", "RECV_B", "B", "SEND_B"};
}

const char* op_name(Op op) { return kOpNames[static_cast<int>(op)]; }

bool parse_op(const std::string& name, Op* op) {
  for (int i = 0; i < 6; ++i) {
    if (name == kOpNames[i]) {
      *op = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

int activations_in_flight(const Problem& p, const std::vector<Instr>& stream, int model) {
  int live = 0, most = 0;
  for (const Instr& in : stream) {
    if (p.model[static_cast<std::size_t>(in.task)] != model) continue;
    if (in.op == Op::F) most = std::max(most, ++live);
    if (in.op == Op::B) --live;
  }
  return most;
}

Lowered lower(const Problem& p, const Order& order, const Timing& timing) {
  const auto n = static_cast<std::size_t>(p.num_tasks);
  const int pools = 2 * static_cast<int>(p.spec.models.size());
  Lowered out;
  out.buffers.assign(static_cast<std::size_t>(p.devices), std::vector<int>(static_cast<std::size_t>(pools), 0));

  // Every cross-device tensor occupies a buffer of its receiver from the
  // producer's end until the consumer starts. Colour those intervals per pool,
  // earliest first, reusing the buffer freed longest ago -- but only one freed
  // strictly before the send: at equal times two devices can each sit in a
  // SEND waiting for the other's RECV, which comes after the SEND in the stream.
  std::vector<std::int32_t> buffer_of(n, -1);  // indexed by the consuming subtask
  std::vector<std::int32_t> messages;
  for (std::size_t t = 0; t < n; ++t) {
    const std::int32_t pr = p.pred[t];
    if (pr >= 0 && p.device[static_cast<std::size_t>(pr)] != p.device[t]) messages.push_back(static_cast<std::int32_t>(t));
  }
  auto sent = [&](std::int32_t t) { return timing.end[static_cast<std::size_t>(p.pred[static_cast<std::size_t>(t)])]; };
  std::sort(messages.begin(), messages.end(), [&](std::int32_t x, std::int32_t y) {
    return sent(x) != sent(y) ? sent(x) < sent(y) : x < y;
  });
  // free_at[device][pool][buffer]
  std::vector<std::vector<std::vector<double>>> free_at(
      static_cast<std::size_t>(p.devices), std::vector<std::vector<double>>(static_cast<std::size_t>(pools)));
  for (std::int32_t t : messages) {
    const auto ti = static_cast<std::size_t>(t);
    auto& slots = free_at[static_cast<std::size_t>(p.device[ti])][static_cast<std::size_t>(pool_of(p.model[ti], p.kind[ti]))];
    std::size_t pick = slots.size();
    for (std::size_t b = 0; b < slots.size(); ++b) {
      if (slots[b] < sent(t) && (pick == slots.size() || slots[b] < slots[pick])) pick = b;
    }
    if (pick == slots.size()) slots.push_back(0);
    slots[pick] = timing.start[ti];
    buffer_of[ti] = static_cast<std::int32_t>(pick);
  }
  for (int d = 0; d < p.devices; ++d) {
    for (int q = 0; q < pools; ++q) {
      out.buffers[static_cast<std::size_t>(d)][static_cast<std::size_t>(q)] =
          static_cast<int>(free_at[static_cast<std::size_t>(d)][static_cast<std::size_t>(q)].size());
    }
  }

  out.streams.resize(static_cast<std::size_t>(p.devices));
  for (int d = 0; d < p.devices; ++d) {
    auto& stream = out.streams[static_cast<std::size_t>(d)];
    for (int i = 0; i < p.per_device; ++i) {
      const std::int32_t t = order[static_cast<std::size_t>(d * p.per_device + i)];
      const auto ti = static_cast<std::size_t>(t);
      const bool fwd = p.kind[ti] == Kind::F;
      if (buffer_of[ti] >= 0) {
        stream.push_back({fwd ? Op::RECV_F : Op::RECV_B, t, p.device[static_cast<std::size_t>(p.pred[ti])], buffer_of[ti]});
      }
      stream.push_back({fwd ? Op::F : Op::B, t, -1, -1});
      const std::int32_t sc = p.succ[ti];
      if (sc >= 0 && buffer_of[static_cast<std::size_t>(sc)] >= 0) {
        // The successor's kind names the tensor: F→F activations, B→B and the
        // last stage's F→B stay on the device.
        stream.push_back({fwd ? Op::SEND_F : Op::SEND_B, t, p.device[static_cast<std::size_t>(sc)], buffer_of[static_cast<std::size_t>(sc)]});
      }
    }
  }
  return out;
}

}  // namespace braid::sched
