// The workflow simulator (ReaL Algorithm 1): nodes of a dataflow graph, each
// on a device mesh, run as soon as their parents are done and every device of
// their mesh is free; nodes are taken in order of the time they became ready,
// so calls on overlapping meshes serialise and calls on disjoint ones overlap.
#pragma once

#include <vector>

#include "plan/mesh.hpp"

namespace braid::plan {

struct SimNode {
  double duration = 0;
  Mesh mesh;
  std::vector<int> parents;  // indices of earlier or later nodes (a DAG)
};

struct SimResult {
  std::vector<double> start, end;
  double makespan = 0;
};

SimResult simulate(const std::vector<SimNode>& nodes, int devices);

}  // namespace braid::plan
