// The analytic profile: what a device of given peak FLOP/s, memory bandwidth
// and links would measure, from a roofline per kernel group (time = max of
// compute and memory time, each at an efficiency) plus a fixed per-layer
// overhead. It writes the same tables a measurement does, on the same grids.
#pragma once

#include <vector>

#include "plan/profile.hpp"

namespace braid::plan {

struct ProfileGrids {
  std::vector<double> tokens = pow2_grid(1, 262144);
  std::vector<double> seq_len = pow2_grid(128, 16384);
  std::vector<double> batch = pow2_grid(1, 1024);
  std::vector<double> kv_len = pow2_grid(128, 16384);
};

// Roofline costs of one piece, used by the tables and by calibration.
struct Roofline {
  double flops = 0;
  double bytes = 0;
};
Roofline layer_forward_cost(const ModelShape& s, int dtype_bytes, double tokens, double seq_len);
Roofline layer_decode_cost(const ModelShape& s, int dtype_bytes, double batch, double kv_len);
double roofline_seconds(const Roofline& r, const Hardware& hw);

LayerMemory analytic_memory(const ModelShape& s, int dtype_bytes);
ModelProfile analytic_model_profile(const ModelShape& s, const Hardware& hw, const ProfileGrids& g = {});
CommProfile analytic_comm(const Hardware& hw);
Profile analytic_profile(const Hardware& hw, const std::vector<ModelShape>& shapes, const ProfileGrids& g = {});

// Fits the efficiency factors of hw to a measured profile: matmul efficiency
// from its compute-bound layer points, memory efficiency from its small-batch
// decode points. Models of `measured` absent from its shapes are skipped.
Efficiency calibrate_efficiency(const Hardware& hw, const Profile& measured);

}  // namespace braid::plan
