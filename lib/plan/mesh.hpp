// Device meshes and parallel strategies: the choices a plan makes per call.
// Devices are numbered node-major (node n holds n*per_node .. n*per_node+per_node-1);
// a mesh is a contiguous range of them. The meshes ReaL allows (§4): an aligned
// power-of-two part of one node, or a run of whole consecutive nodes.
#pragma once

#include <string>
#include <vector>

namespace braid::plan {

struct Mesh {
  int first = 0;  // first device
  int count = 1;  // devices
  int end() const { return first + count; }
  bool overlaps(const Mesh& o) const { return first < o.end() && o.first < end(); }
  bool contains(const Mesh& o) const { return first <= o.first && o.end() <= end(); }
  bool spans_nodes(int per_node) const { return first / per_node != (end() - 1) / per_node; }
  bool operator==(const Mesh& o) const = default;
  // "node3[0-3]" or "node[0-7]" (whole nodes)
  std::string describe(int per_node) const;
};

std::vector<Mesh> allowed_meshes(int nodes, int per_node);

// Data, tensor and pipeline parallel degrees (dp * tp * pp = mesh devices) and
// the number of micro-batches each data-parallel replica splits its batch into; a training
// call's activation recomputation (braid-train --recompute: 0 none, k every k-th layer).
struct Strategy {
  int dp = 1, tp = 1, pp = 1, micro = 1;
  int recompute = 0;
  bool operator==(const Strategy& o) const = default;
  std::string describe() const;  // "d4t2p1 m2" (" r1" recomputing)
  std::string compact() const;   // "d4t2" (degrees of 1 left out; "r1" recomputing)
};

}  // namespace braid::plan
