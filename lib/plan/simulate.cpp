#include "plan/simulate.hpp"

#include <algorithm>
#include <queue>
#include <stdexcept>

namespace braid::plan {

SimResult simulate(const std::vector<SimNode>& nodes, int devices) {
  const int n = static_cast<int>(nodes.size());
  SimResult r;
  r.start.assign(nodes.size(), 0.0);
  r.end.assign(nodes.size(), 0.0);
  std::vector<double> ready(nodes.size(), 0.0);
  std::vector<int> waiting(nodes.size(), 0);
  std::vector<std::vector<int>> children(nodes.size());
  for (int i = 0; i < n; ++i) {
    waiting[i] = static_cast<int>(nodes[i].parents.size());
    for (int p : nodes[i].parents) children[p].push_back(i);
  }
  // Min-heap on (ready time, index): ties resolve in graph order.
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  for (int i = 0; i < n; ++i) {
    if (waiting[i] == 0) queue.push({0.0, i});
  }
  std::vector<double> free_at(static_cast<std::size_t>(devices), 0.0);
  int done = 0;
  while (!queue.empty()) {
    const auto [t, v] = queue.top();
    queue.pop();
    const Mesh& m = nodes[v].mesh;
    double start = t;
    for (int d = m.first; d < m.end(); ++d) start = std::max(start, free_at[d]);
    r.start[v] = start;
    r.end[v] = start + nodes[v].duration;
    for (int d = m.first; d < m.end(); ++d) free_at[d] = r.end[v];
    r.makespan = std::max(r.makespan, r.end[v]);
    ++done;
    for (int c : children[v]) {
      ready[c] = std::max(ready[c], r.end[v]);
      if (--waiting[c] == 0) queue.push({ready[c], c});
    }
  }
  if (done != n) throw std::logic_error("workflow graph has a cycle");
  return r;
}

}  // namespace braid::plan
