// plan.json ("braid.plan" v1) and the one-line summary braid-meshplan prints.
#pragma once

#include <string>

#include "core/json.hpp"
#include "plan/search.hpp"

namespace braid::plan {

inline constexpr int kPlanVersion = 1;

struct PlanInputs {
  std::string experiment, cluster, profile;  // as given on the command line
  std::string profile_source;                 // analytic, calibrated, measured
  std::string hardware;
};

ordered_json plan_to_json(const PlanSpace& space, const SearchResult& r, const PlanInputs& in);

// "actor_gen d16t8 | ref+rw d32t8 | train fused t8p16/t8p8 | iter 41.2 s (serial 55.0 s)"
std::string plan_summary(const PlanSpace& space, const SearchResult& r);

}  // namespace braid::plan
