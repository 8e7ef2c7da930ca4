// Small problems the sched tests share.
#pragma once

#include <string>

#include "sched/problem.hpp"

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

}  // namespace braid::sched::testing
