// Small problems the sched tests share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched::testing {

// Two models on `devices` devices: an actor of `devices` stages and a mirrored
// critic of devices/critic_replicas stages, costs as given (bwd = 2 x fwd).
inline SchedSpec two_models(int devices, int actor_mb, int critic_replicas, double actor_fwd, double critic_fwd,
                            double actor_mem = 2.0, double critic_mem = 1.5) {
  SchedSpec s;
  s.devices = devices;
  ModelSpec a{.name = "actor", .stages = devices, .replicas = 1, .micro_batches = actor_mb};
  a.fwd.assign(static_cast<std::size_t>(devices), actor_fwd);
  a.bwd.assign(static_cast<std::size_t>(devices), 2 * actor_fwd);
  a.act_mem.assign(static_cast<std::size_t>(devices), actor_mem);
  const int cs = devices / critic_replicas;
  ModelSpec c{.name = "critic", .stages = cs, .replicas = critic_replicas,
              .micro_batches = actor_mb / critic_replicas, .forward = false};
  c.fwd.assign(static_cast<std::size_t>(cs), critic_fwd);
  c.bwd.assign(static_cast<std::size_t>(cs), 2 * critic_fwd);
  c.act_mem.assign(static_cast<std::size_t>(cs), critic_mem);
  s.models = {a, c};
  return s;
}

// Actor over 2 devices, critic as 2 single-stage replicas: 6 subtasks a device,
// few enough to try every order of every device.
inline SchedSpec tiny(double af, double ab, double cf, double cb) {
  SchedSpec s;
  s.devices = 2;
  ModelSpec a{.name = "actor", .stages = 2, .replicas = 1, .micro_batches = 2};
  a.fwd = {af, af * 1.5};
  a.bwd = {ab, ab * 0.8};
  a.act_mem = {2, 2};
  ModelSpec c{.name = "critic", .stages = 1, .replicas = 2, .micro_batches = 1, .forward = false};
  c.fwd = {cf};
  c.bwd = {cb};
  c.act_mem = {3};
  s.models = {a, c};
  return s;
}

// An actor and a critic of two stages each, running in opposite directions over
// two devices (one micro-batch of the critic).
inline SchedSpec two_opposed(int actor_mb, double critic_mem) {
  SchedSpec s;
  s.devices = 2;
  ModelSpec a{.name = "actor", .stages = 2, .replicas = 1, .micro_batches = actor_mb};
  a.fwd = {2, 3};
  a.bwd = {4, 5};
  a.act_mem = {1, 1};
  ModelSpec c{.name = "critic", .stages = 2, .replicas = 1, .micro_batches = 1, .forward = false};
  c.fwd = {1, 2.5};
  c.bwd = {3, 2};
  c.act_mem = {critic_mem, critic_mem};
  s.models = {a, c};
  return s;
}

// A latency search's schedule of p from 1F1B (no memory pass), `iterations` long or
// until it reaches `bound` (0: never stops early).
inline Order latency_searched(const Problem& p, std::uint64_t iterations, std::uint64_t seed, double bound) {
  AnnealOptions opt;
  opt.iterations = iterations;
  opt.time_limit = 0;
  opt.memory_pass = false;
  opt.seed = seed;
  return anneal(p, one_f_one_b(p), bound, opt).order;
}

// Calls f(order) for every permutation of every device's subtasks (valid or not).
template <class F>
void for_every_order(const Problem& p, F&& f) {
  std::vector<std::vector<std::vector<std::int32_t>>> choices(static_cast<std::size_t>(p.devices));
  for (int d = 0; d < p.devices; ++d) {
    std::vector<std::int32_t> tasks;
    for (int i = 0; i < p.per_device; ++i) tasks.push_back(d * p.per_device + i);
    do {
      choices[static_cast<std::size_t>(d)].push_back(tasks);
    } while (std::next_permutation(tasks.begin(), tasks.end()));
  }
  std::vector<std::size_t> pick(static_cast<std::size_t>(p.devices), 0);
  Order order(static_cast<std::size_t>(p.num_tasks));
  for (;;) {
    for (int d = 0; d < p.devices; ++d) {
      const auto& c = choices[static_cast<std::size_t>(d)][pick[static_cast<std::size_t>(d)]];
      std::copy(c.begin(), c.end(), order.begin() + static_cast<std::ptrdiff_t>(d) * p.per_device);
    }
    f(static_cast<const Order&>(order));
    int d = 0;
    while (d < p.devices && ++pick[static_cast<std::size_t>(d)] == choices[static_cast<std::size_t>(d)].size()) {
      pick[static_cast<std::size_t>(d)] = 0;
      ++d;
    }
    if (d == p.devices) return;
  }
}

}  // namespace braid::sched::testing
