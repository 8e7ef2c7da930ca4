#include "sched/problem.hpp"

namespace braid::sched {

int Problem::device_of(int m, int r, int s) const {
  const auto& ms = spec.models[static_cast<std::size_t>(m)];
  return r * ms.stages + (ms.forward ? s : ms.stages - 1 - s);
}

int Problem::stage_on(int m, int d) const {
  const auto& ms = spec.models[static_cast<std::size_t>(m)];
  const int local = d % ms.stages;
  return ms.forward ? local : ms.stages - 1 - local;
}

int Problem::replica_on(int m, int d) const { return d / spec.models[static_cast<std::size_t>(m)].stages; }

int Problem::task_id(int m, int r, int s, int j, Kind k) const {
  const auto& ms = spec.models[static_cast<std::size_t>(m)];
  return device_of(m, r, s) * per_device + model_offset[static_cast<std::size_t>(m)] +
         (k == Kind::B ? ms.micro_batches : 0) + j;
}

Problem build_problem(const SchedSpec& spec) {
  Problem p;
  p.spec = spec;
  p.devices = spec.devices;
  int offset = 0;
  for (const auto& m : spec.models) {
    p.model_offset.push_back(offset);
    offset += 2 * m.micro_batches;
  }
  p.per_device = offset;
  p.num_tasks = p.devices * p.per_device;
  const auto n = static_cast<std::size_t>(p.num_tasks);
  p.dur.assign(n, 0);
  p.mem_delta.assign(n, 0);
  p.lag.assign(n, 0);
  p.pred.assign(n, -1);
  p.succ.assign(n, -1);
  p.device.assign(n, 0);
  p.model.assign(n, 0);
  p.replica.assign(n, 0);
  p.stage.assign(n, 0);
  p.micro_batch.assign(n, 0);
  p.kind.assign(n, Kind::F);

  for (int d = 0; d < p.devices; ++d) {
    for (int m = 0; m < static_cast<int>(spec.models.size()); ++m) {
      const auto& ms = spec.models[static_cast<std::size_t>(m)];
      const int r = p.replica_on(m, d);
      const int s = p.stage_on(m, d);
      for (int k = 0; k < 2; ++k) {
        const Kind kind = k == 0 ? Kind::F : Kind::B;
        for (int j = 0; j < ms.micro_batches; ++j) {
          const auto t = static_cast<std::size_t>(p.task_id(m, r, s, j, kind));
          const auto si = static_cast<std::size_t>(s);
          p.device[t] = d;
          p.model[t] = static_cast<std::int16_t>(m);
          p.replica[t] = static_cast<std::int16_t>(r);
          p.stage[t] = static_cast<std::int16_t>(s);
          p.micro_batch[t] = j;
          p.kind[t] = kind;
          p.dur[t] = kind == Kind::F ? ms.fwd[si] : ms.bwd[si];
          p.mem_delta[t] = kind == Kind::F ? ms.act_mem[si] : -ms.act_mem[si];
          int pred = -1;
          if (kind == Kind::F && s > 0) pred = p.task_id(m, r, s - 1, j, Kind::F);
          if (kind == Kind::B) {
            pred = s + 1 < ms.stages ? p.task_id(m, r, s + 1, j, Kind::B) : p.task_id(m, r, s, j, Kind::F);
          }
          p.pred[t] = pred;
          if (pred >= 0) {
            p.succ[static_cast<std::size_t>(pred)] = static_cast<std::int32_t>(t);
            const int pred_device = kind == Kind::F ? p.device_of(m, r, s - 1)
                                                    : (s + 1 < ms.stages ? p.device_of(m, r, s + 1) : d);
            p.lag[t] = pred_device == d ? 0.0 : spec.p2p_time;
          }
        }
      }
    }
  }
  return p;
}

}  // namespace braid::sched
