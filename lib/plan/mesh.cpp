#include "plan/mesh.hpp"

#include <fmt/format.h>

namespace braid::plan {

std::string Mesh::describe(int per_node) const {
  const int n0 = first / per_node, n1 = (end() - 1) / per_node;
  if (count % per_node == 0 && first % per_node == 0) {
    return n0 == n1 ? fmt::format("node{}", n0) : fmt::format("node[{}-{}]", n0, n1);
  }
  const int d0 = first % per_node;
  return count == 1 ? fmt::format("node{}[{}]", n0, d0) : fmt::format("node{}[{}-{}]", n0, d0, d0 + count - 1);
}

std::vector<Mesh> allowed_meshes(int nodes, int per_node) {
  std::vector<Mesh> out;
  for (int d = 1; d < per_node; d *= 2) {
    for (int n = 0; n < nodes; ++n) {
      for (int k = 0; k < per_node / d; ++k) out.push_back({n * per_node + k * d, d});
    }
  }
  for (int k = 1; k <= nodes; ++k) {
    for (int a = 0; a + k <= nodes; ++a) out.push_back({a * per_node, k * per_node});
  }
  return out;
}

std::string Strategy::describe() const {
  return fmt::format("d{}t{}p{} m{}{}", dp, tp, pp, micro, recompute > 0 ? fmt::format(" r{}", recompute) : "");
}

std::string Strategy::compact() const {
  std::string s;
  if (dp > 1) s += fmt::format("d{}", dp);
  if (tp > 1) s += fmt::format("t{}", tp);
  if (pp > 1) s += fmt::format("p{}", pp);
  if (s.empty()) s = "d1";
  if (recompute > 0) s += fmt::format("r{}", recompute);
  return s;
}

}  // namespace braid::plan
