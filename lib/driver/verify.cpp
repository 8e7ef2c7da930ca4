#include "driver/verify.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "core/json.hpp"
#include "checkpoint/weight_layout.hpp"

namespace braid::driver {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const fs::path& dir, std::string_view prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".h5")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// check_file's verdict; a reader that throws counts as damage too.
std::optional<std::string> check(const fs::path& file) {
  try {
    return checkpoint::check_braid_file(file.string());
  } catch (const std::exception& e) {
    return fmt::format("{}: {}", file.string(), e.what());
  }
}

}  // namespace

std::optional<std::string> damaged_checkpoint(const std::vector<fs::path>& files) {
  for (const auto& spec : files) {
    for (const auto& f : checkpoint_files_of(spec)) {
      if (auto why = check(f)) return why;
    }
  }
  return std::nullopt;
}

std::optional<std::string> damaged_scored_shards(const Layout& layout, int iteration, std::vector<fs::path>* damaged) {
  const fs::path scored_dir = layout.scored_dir(iteration);
  const std::vector<std::string> scored = names_in(scored_dir, "scored-");
  std::optional<std::string> first;
  auto note = [&](std::string why) {
    if (!first) first = std::move(why);
  };
  for (const auto& g : names_in(layout.samples_dir(iteration), "gen-")) {
    const std::string want = "scored-" + g.substr(4);
    if (!std::binary_search(scored.begin(), scored.end(), want)) {
      note(fmt::format("{} is missing (its sample shard {} is there)", (scored_dir / want).string(), g));
    }
  }
  try {
    const fs::path stats = layout.stats_file(iteration, "score");
    const json doc = load_json_file(stats.string());
    if (doc.is_object() && doc.contains("shards_scored") && doc.contains("shards_skipped")) {
      const auto want = doc["shards_scored"].get<std::int64_t>() + doc["shards_skipped"].get<std::int64_t>();
      if (static_cast<std::int64_t>(scored.size()) < want) {
        note(fmt::format("{} holds {} scored shards, {} counts {}", scored_dir.string(), scored.size(), stats.string(),
                         want));
      }
    }
  } catch (const std::exception& e) {
    note(e.what());
  }
  if (scored.empty()) note(fmt::format("{} holds no scored shard", scored_dir.string()));
  for (const auto& s : scored) {
    if (auto why = check(scored_dir / s)) {
      note(*why);
      if (damaged != nullptr) damaged->push_back(scored_dir / s);
    }
  }
  return first;
}

}  // namespace braid::driver
