// Finding a plan: starting points from ReaL (each call at its fastest, §5.2)
// and HybridFlow's placements (colocate, split, standalone; §4.4), then
// Metropolis–Hastings over per-call choices with an OOM penalty and a time
// limit, then a descent that retries every option of each call until none
// helps. When the space is small, exact enumeration instead.
#pragma once

#include <cstdint>
#include <string>

#include "plan/plan_space.hpp"

namespace braid::plan {

struct SearchOptions {
  std::string method = "auto";     // auto | mh | exhaustive
  double time_limit_s = 20;        // wall time of the search (chain and descent)
  long max_iterations = 200000;    // proposals for Metropolis–Hastings
  std::uint64_t seed = 1;
  double exhaustive_limit = 2e5;   // auto: enumerate when the space has at most this many plans
  bool progress = true;
};

struct SearchResult {
  Plan plan;
  Evaluation eval;
  std::string method;
  std::string start;      // the starting point MH began from
  long evaluated = 0;     // plans costed
  double seconds = 0;
};

SearchResult search_plan(const PlanSpace& space, const SearchOptions& opt);
SearchResult exhaustive_search(const PlanSpace& space, bool progress);

// The fastest entry of a call on a mesh (ignoring memory); -1 if none.
int fastest_entry(const PlanSpace& space, int call, int mesh);

}  // namespace braid::plan
