#include "driver/layout.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

namespace braid::driver {

namespace fs = std::filesystem;

fs::path Layout::iteration_dir(int iteration) const { return out_ / fmt::format("iter-{:04d}", iteration); }

fs::path Layout::stats_file(int iteration, std::string_view stage) const {
  return iteration_dir(iteration) / fmt::format("{}.stats.json", stage);
}

fs::path Layout::checkpoint(int iteration, std::string_view model) const {
  return iteration_dir(iteration) / fmt::format("{}.h5", model);
}

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
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return {spec};
  // Stage files of one split: "x.stage0-of-4.h5" ... "x.stage3-of-4.h5".
  const fs::path dir = spec.has_parent_path() ? spec.parent_path() : fs::path(".");
  const std::string first_prefix = spec.stem().string() + ".stage0-of-";
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(first_prefix, 0) != 0 || !name.ends_with(".h5")) continue;
    const std::string count = name.substr(first_prefix.size(), name.size() - first_prefix.size() - 3);
    if (count.empty() || count.size() > 5 || count.find_first_not_of("0123456789") != std::string::npos) continue;
    const int stages = std::stoi(count);
    std::vector<fs::path> files;
    for (int s = 0; s < stages; ++s) {
      fs::path p = dir / fmt::format("{}.stage{}-of-{}.h5", spec.stem().string(), s, stages);
      if (!fs::is_regular_file(p, ec)) break;
      files.push_back(std::move(p));
    }
    if (static_cast<int>(files.size()) == stages) return files;
  }
  return {};
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
