// What a weight shard must hold, read from the file itself: its model_config and layer
// range give every tensor a model of those layers has (model::tensor_shapes), with the
// embedding on the first layer, the final norm and a head (lm_head.weight or a tied
// embedding, or score.weight) on the last. A tensor missing, shaped otherwise (transposed,
// a dimension added) or not the model's at all is a problem; an optimizer-state file must
// hold every parameter's moments, shaped as the parameter. `braid check`, `braid inspect`
// and the checks of braid run's resume read files through this, so that a file which
// loading would refuse (or which a model would load without one of its tensors) is not
// called good.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/weight_shard.hpp"

namespace braid::checkpoint {

// Every problem of the shard's tensors against its model (empty: none), each naming the
// tensor ("lm_head.weight: missing ...").
std::vector<std::string> layout_problems(const io::WeightShardReader& shard);

// io::check_file (the seal, the checksums, the values), then, for a weight shard, its
// layout_problems: nullopt when the file is good, else why not (the file named).
std::optional<std::string> check_braid_file(const std::string& path, std::vector<std::string>* notes = nullptr);

}  // namespace braid::checkpoint
