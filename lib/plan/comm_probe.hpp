// Point-to-point and all-reduce bandwidth and latency between the ranks of a
// communicator (braid-profile under mpirun: every rank): ping-pong between
// ranks 0 and 1, a sum all-reduce of fp32 over all ranks, each size repeated,
// medians kept. Ranks on one host measure the intra-node links; ranks on
// different hosts the inter-node ones.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "core/json.hpp"
#include "plan/profile.hpp"

namespace braid::plan {

struct CommPoint {
  double bytes = 0;
  double seconds = 0;  // median: one-way for p2p, the whole call for all-reduce
  double spread = 0;
};

struct CommMeasurement {
  int ranks = 1;
  bool same_host = true;       // every rank on rank 0's host
  std::vector<CommPoint> p2p, allreduce;
  LinkCosts p2p_link, allreduce_link;  // fitted: latency of the smallest, bandwidth of the largest
};

// Collective over world; every rank gets the result. Checks the all-reduced values and
// throws if they are wrong.
CommMeasurement measure_comm(comm::Communicator& world, double max_bytes = 64e6, int repeats = 5);
ordered_json comm_to_json(const CommMeasurement& m);

}  // namespace braid::plan
