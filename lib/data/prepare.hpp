// `braid data`: a prompt file made ready for a run (docs/tools/run.md, "The dataset").
#pragma once

#include "data/split.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::data {

// A prepared dataset: `input` with the field map applied, split into DIR/train.jsonl and
// (with a held-out part) DIR/heldout.jsonl, each written atomically. Returns a summary
// (braid.data, version 1: the input, the field map, the counts and both files).
struct PrepareOptions {
  std::string input;
  std::string out_dir;
  std::vector<std::string> fields;  // "prompt=question", ... (data/fields.hpp)
  HeldOut heldout;
  std::uint64_t seed = 0;
};
std::string prepare_dataset(const PrepareOptions& o);

}  // namespace braid::data
