#include "sched/dryrun.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace braid::sched {
namespace {

struct Slot {
  bool full = false;
  std::int32_t tensor = -1;  // the producing subtask
  double arrive = 0;         // when the tensor is there
  double freed = 0;          // when the last RECV emptied it
};

std::string cell(const Problem& p, const Instr& in) {
  const auto t = static_cast<std::size_t>(in.task);
  std::string s = fmt::format("{}:{}{}", op_name(in.op), p.spec.models[static_cast<std::size_t>(p.model[t])].name.substr(0, 1),
                              p.micro_batch[t]);
  if (in.peer >= 0) s += fmt::format("@{}", in.peer);
  return s;
}

std::string render_grid(const Problem& p, const Lowered& lw, const std::vector<std::size_t>& ip,
                        const std::vector<std::string>& why) {
  const std::size_t devices = lw.streams.size();
  std::size_t lo = SIZE_MAX, hi = 0;
  for (std::size_t d = 0; d < devices; ++d) {
    lo = std::min(lo, ip[d]);
    hi = std::max(hi, std::min(ip[d], lw.streams[d].size()));
  }
  lo = lo >= 2 ? lo - 2 : 0;
  hi = std::min(hi + 1, lo + 40);  // keep the grid readable
  std::string out = fmt::format("{:>6} ", "step");
  for (std::size_t d = 0; d < devices; ++d) out += fmt::format("| {:<16}", fmt::format("dev {}", d));
  out += "\n";
  for (std::size_t step = lo; step <= hi; ++step) {
    out += fmt::format("{:>6} ", step);
    for (std::size_t d = 0; d < devices; ++d) {
      std::string c;
      if (step < lw.streams[d].size()) {
        c = cell(p, lw.streams[d][step]);
        if (step == ip[d]) c = "*" + c;  // where this device waits
        else if (step < ip[d]) c = " " + c;
        else c = "." + c;
      }
      out += fmt::format("| {:<16}", c);
    }
    out += "\n";
  }
  out += "(* waiting here, . not reached)\n";
  for (std::size_t d = 0; d < devices; ++d) {
    if (!why[d].empty()) out += fmt::format("dev {}: {}\n", d, why[d]);
  }
  return out;
}

// An instruction as a reader of the schedule file finds it.
std::string describe(const Problem& p, const Instr& in) {
  const auto t = static_cast<std::size_t>(in.task);
  std::string s = fmt::format("{} of {} replica {} stage {} micro-batch {}", op_name(in.op),
                              p.spec.models[static_cast<std::size_t>(p.model[t])].name, p.replica[t], p.stage[t],
                              p.micro_batch[t]);
  if (in.peer >= 0) s += fmt::format(", peer {} buffer {}", in.peer, in.buffer);
  return s;
}

}  // namespace

DryRun dry_run(const Problem& p, const Lowered& lw) {
  DryRun r;
  const std::size_t devices = lw.streams.size();
  if (devices != static_cast<std::size_t>(p.devices)) {
    r.problem = fmt::format("{} instruction streams for {} devices", devices, p.devices);
    return r;
  }
  std::vector<std::size_t> ip(devices, 0);
  std::vector<double> clock(devices, 0.0);
  std::vector<double> done_at(static_cast<std::size_t>(p.num_tasks), -1.0);
  std::map<std::tuple<int, int, int>, Slot> slots;  // (receiver, pool, buffer)
  std::vector<std::string> why(devices);
  // Whether the next compute's input is in hand: a RECV just before it, or a
  // same-device predecessor already run.
  std::vector<std::int32_t> received(devices, -1);

  auto fail = [&](std::size_t d, const std::string& what) {
    const Instr& in = lw.streams[d][ip[d]];
    r.problem = in.task >= 0 && in.task < p.num_tasks
                    ? fmt::format("device {} instruction {} ({}): {}", d, ip[d], describe(p, in), what)
                    : fmt::format("device {} instruction {}: {}", d, ip[d], what);
    why[d] = what;
    r.grid = render_grid(p, lw, ip, why);
    return r;
  };

  for (;;) {
    bool progress = false, all_done = true;
    for (std::size_t d = 0; d < devices; ++d) {
      const auto& stream = lw.streams[d];
      while (ip[d] < stream.size()) {
        const Instr& in = stream[ip[d]];
        if (in.task < 0 || in.task >= p.num_tasks) return fail(d, fmt::format("subtask {} does not exist", in.task));
        const auto t = static_cast<std::size_t>(in.task);
        const int pool = pool_of(p.model[t], p.kind[t]);
        if (in.op == Op::F || in.op == Op::B) {
          if (p.device[t] != static_cast<int>(d) || (p.kind[t] == Kind::F) != (in.op == Op::F)) {
            return fail(d, fmt::format("{} of subtask {} does not belong to this device", op_name(in.op), in.task));
          }
          if (done_at[t] >= 0) return fail(d, fmt::format("subtask {} runs twice", in.task));
          const std::int32_t pr = p.pred[t];
          double ready = clock[d];
          if (pr >= 0) {
            const auto pri = static_cast<std::size_t>(pr);
            if (p.device[pri] == static_cast<int>(d)) {
              if (done_at[pri] < 0) {
                why[d] = fmt::format("needs subtask {} of this device, not run yet", pr);
                break;
              }
              ready = std::max(ready, done_at[pri]);
            } else if (received[d] != in.task) {
              return fail(d, fmt::format("{} of subtask {} without a RECV of its input just before", op_name(in.op), in.task));
            }
          }
          clock[d] = ready + p.dur[t];
          done_at[t] = clock[d];
          received[d] = -1;
        } else if (in.op == Op::RECV_F || in.op == Op::RECV_B) {
          auto it = slots.find({static_cast<int>(d), pool, in.buffer});
          if (it == slots.end() || !it->second.full) {
            why[d] = fmt::format("waits for a tensor from device {} in buffer {}", in.peer, in.buffer);
            break;
          }
          if (it->second.tensor != p.pred[t]) {
            return fail(d, fmt::format("buffer {} holds the output of subtask {}, expected that of subtask {}", in.buffer,
                                       it->second.tensor, p.pred[t]));
          }
          clock[d] = std::max(clock[d], it->second.arrive);
          it->second.full = false;
          it->second.freed = clock[d];
          received[d] = in.task;
        } else {  // SEND_F / SEND_B
          const std::int32_t sc = p.succ[t];
          if (done_at[t] < 0) return fail(d, fmt::format("sends the output of subtask {} before computing it", in.task));
          if (sc < 0 || p.device[static_cast<std::size_t>(sc)] != in.peer) {
            return fail(d, fmt::format("sends subtask {}'s output to device {}, which does not consume it", in.task, in.peer));
          }
          const auto sci = static_cast<std::size_t>(sc);
          const int dest_pool = pool_of(p.model[sci], p.kind[sci]);
          const auto& counts = lw.buffers[static_cast<std::size_t>(in.peer)];
          if (in.buffer < 0 || static_cast<std::size_t>(dest_pool) >= counts.size() || in.buffer >= counts[static_cast<std::size_t>(dest_pool)]) {
            return fail(d, fmt::format("buffer {} is outside device {}'s pool", in.buffer, in.peer));
          }
          Slot& s = slots[{in.peer, dest_pool, in.buffer}];
          if (s.full) {
            why[d] = fmt::format("waits for buffer {} of device {} to be emptied", in.buffer, in.peer);
            break;
          }
          clock[d] = std::max(clock[d], s.freed);
          s.full = true;
          s.tensor = in.task;
          s.arrive = clock[d] + p.lag[sci];
        }
        why[d].clear();
        ++ip[d];
        progress = true;
      }
      if (ip[d] < stream.size()) all_done = false;
    }
    if (all_done) break;
    if (!progress) {
      r.problem = "deadlock: every unfinished device waits on another";
      std::string sep = " (";
      for (std::size_t d = 0; d < devices; ++d) {
        if (ip[d] >= lw.streams[d].size()) continue;
        r.problem += fmt::format("{}device {} instruction {} ({}): {}", sep, d, ip[d], describe(p, lw.streams[d][ip[d]]),
                                 why[d]);
        sep = "; ";
      }
      r.problem += ")";
      r.grid = render_grid(p, lw, ip, why);
      return r;
    }
  }
  for (const auto& [key, s] : slots) {
    if (s.full) {
      r.problem = fmt::format("the output of subtask {} sent to device {} is never received", s.tensor, std::get<0>(key));
      return r;
    }
  }
  for (std::size_t t = 0; t < done_at.size(); ++t) {
    if (done_at[t] < 0) {
      r.problem = fmt::format("device {} never runs {} of {} replica {} stage {} micro-batch {} (subtask {})", p.device[t],
                              p.kind[t] == Kind::F ? "F" : "B", p.spec.models[static_cast<std::size_t>(p.model[t])].name,
                              p.replica[t], p.stage[t], p.micro_batch[t], t);
      return r;
    }
  }
  r.device_end = clock;
  r.makespan = *std::max_element(clock.begin(), clock.end());
  r.ok = true;
  return r;
}

}  // namespace braid::sched
