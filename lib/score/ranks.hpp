// braid-score under mpirun: which inputs each rank scores, and the few messages the
// ranks exchange (their --stats figures to rank 0, and the end of the run).
//
// The inputs are cut into units: under PPO every shard is one; under GRPO the shards
// whose samples share a group (sample_id / samples_per_prompt) form one unit, since a
// group's advantages need all of its rewards. Units are dealt whole to the ranks in
// input order, each to the rank with the fewest sequences so far (ties: the lower
// rank), so the ranks' parts are disjoint, together are the inputs, and are as even
// as whole units allow. Every rank computes the same deal from the same files.
#pragma once

#include "core/json.hpp"
#include "score/command.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace braid::comm {
class Communicator;
}

namespace braid::score {

// The units of these inputs (indices into `inputs`, in input order), given each
// input's sample ids and the GRPO group size (0: PPO, every input its own unit).
std::vector<std::vector<std::size_t>> score_units(std::span<const std::vector<std::int64_t>> sample_ids,
                                                  std::int64_t samples_per_prompt);

// The deal above: unit u goes to result[u]; `sequences` per input.
std::vector<int> deal_units(const std::vector<std::vector<std::size_t>>& units,
                            std::span<const std::int64_t> sequences, int ranks);

// This rank's inputs (reads every input's header, and its sample ids under GRPO).
// InputError when two inputs would write the same output, or (GRPO) when the group
// size is not known (--samples-per-prompt, or the inputs' generate config).
std::vector<std::string> inputs_of_rank(const CommandOptions& o, const ScoreSettings& settings, int rank, int ranks);

// Every rank's text on `root`, by rank (others get an empty list). Waits asleep, not
// spinning, so a rank that is done leaves its core to those still scoring.
std::vector<std::string> gather_on_root(comm::Communicator& world, const std::string& mine, int root);
// The end of the run: root lets the others go; they wait for it asleep (MPI's own
// finalisation would spin at full CPU).
void release_from_root(comm::Communicator& world, int root);

}  // namespace braid::score
