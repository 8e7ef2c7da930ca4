#include "driver/layout.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

namespace braid::driver {

namespace fs = std::filesystem;

fs::path Layout::iteration_dir(int iteration) const { return out_ / fmt::format("iter-{:04d}", iteration); }

fs::path Layout::stats_file(int iteration, std::string_view stage) const {
  return iteration_dir(iteration) / fmt::format("{}.stats.json", stage);
}

fs::path Layout::checkpoint(int iteration, std::string_view model) const {
  return iteration_dir(iteration) / fmt::format("{}.h5", model);
}

fs::path Layout::data_file(std::string_view name) const { return out_ / "data" / fmt::format("{}.jsonl", name); }

std::vector<fs::path> scored_shards(const Layout& layout, int iteration) {
  std::vector<fs::path> shards;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout.scored_dir(iteration), ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("scored-") && name.ends_with(".h5")) shards.push_back(e.path());
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

std::vector<fs::path> checkpoint_files_of(const fs::path& spec) {
  // The file, or every stage file of one split, or every tp rank's files (each whole or in
  // stages): as every reader finds them (checkpoint::checkpoint_files); none when some are missing.
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return {spec};
  if (!fs::is_directory(spec.has_parent_path() ? spec.parent_path() : fs::path("."), ec)) return {};
  try {
    return checkpoint::checkpoint_files(spec);
  } catch (const InputError&) {
    return {};
  }
}

std::vector<fs::path> stage_files(const fs::path& checkpoint, int stages) {
  if (stages <= 1) return {checkpoint};
  std::vector<fs::path> files;
  for (int s = 0; s < stages; ++s) {
    files.push_back(checkpoint.parent_path() / fmt::format("{}.stage{}-of-{}.h5", checkpoint.stem().string(), s, stages));
  }
  return files;
}

fs::path optimizer_path(const fs::path& checkpoint) {
  fs::path p = checkpoint;
  p.replace_extension(".optim.h5");
  return p;
}

}  // namespace braid::driver
