#include "data/prepare.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "data/fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <stdexcept>

namespace braid::data {

std::string prepare_dataset(const PrepareOptions& o) {
  FieldMap map;
  std::vector<std::string> problems;
  for (const auto& f : o.fields) {
    if (auto p = add_field(map, f)) problems.push_back(*p);
  }
  if (!problems.empty()) throw UsageError(fmt::format("--field: {}", fmt::join(problems, "; ")));
  const std::vector<std::string> lines = map_lines(read_text_file(o.input), o.input, map);
  Split split;
  try {
    split = split_lines(static_cast<std::int64_t>(lines.size()), o.heldout, o.seed);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--heldout: {} ({})", e.what(), o.input));
  }
  std::filesystem::create_directories(o.out_dir);
  const auto write = [&](const std::vector<std::int64_t>& which, const std::string& name) {
    std::string text;
    for (const std::int64_t i : which) text += lines[static_cast<std::size_t>(i)] + "\n";
    const std::string path = (std::filesystem::path(o.out_dir) / name).string();
    write_text_file(path, text);
    return path;
  };
  ordered_json summary;
  summary["format"] = "braid.data";
  summary["version"] = 1;
  summary["input"] = o.input;
  summary["fields"] = map.source;
  summary["lines"] = lines.size();
  summary["seed"] = o.seed;
  summary["train"] = {{"file", write(split.train, "train.jsonl")}, {"lines", split.train.size()}};
  if (!split.heldout.empty()) {
    summary["heldout"] = {{"file", write(split.heldout, "heldout.jsonl")}, {"lines", split.heldout.size()}};
  }
  return summary.dump();
}

}  // namespace braid::data
