// Lowering a compute-only schedule (per device: which F/B runs next) into the
// instruction streams a runtime executes: RECV before a subtask whose input
// comes from another device, SEND after one whose output goes to another.
//
// Semantics the streams are written for (and the dry run checks): a SEND puts
// the tensor into receive buffer `buffer` of the peer's pool for that model and
// direction, waiting while that buffer still holds an earlier tensor; a RECV
// waits until its buffer holds the tensor and frees it. Buffers are assigned
// from the predicted times (interval colouring), so their number per pool is
// the most tensors that are ever in flight to it at once: derived, not tuned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

enum class Op : std::uint8_t { RECV_F, F, SEND_F, RECV_B, B, SEND_B };

const char* op_name(Op op);
bool parse_op(const std::string& name, Op* op);

struct Instr {
  Op op;
  std::int32_t task;    // the subtask computed, received for, or sent from
  std::int32_t peer;    // other device (RECV/SEND), -1 for compute
  std::int32_t buffer;  // buffer id in the receiver's pool (RECV/SEND), -1 for compute
};

struct Lowered {
  std::vector<std::vector<Instr>> streams;  // per device
  // buffers[device][pool] with pool = 2 * model + (0: activations for F, 1: gradients for B).
  std::vector<std::vector<int>> buffers;
};

inline int pool_of(int model, Kind kind) { return 2 * model + (kind == Kind::B ? 1 : 0); }

// `timing` must be evaluate(p, order) of a valid order.
Lowered lower(const Problem& p, const Order& order, const Timing& timing);

// How many micro-batches of model `model` a device's stream holds activations for at
// once (from each F to its B): the activation slots a runtime keeps for it there.
int activations_in_flight(const Problem& p, const std::vector<Instr>& stream, int model);

}  // namespace braid::sched
