#include "driver/retention.hpp"

#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"

namespace braid::driver {

namespace fs = std::filesystem;

namespace {

fs::path marker(const Layout& layout, int iteration) { return layout.iteration_dir(iteration) / "pruned.json"; }

bool saved(const RunSpec& spec, int i) {
  const CheckpointSpec& c = *spec.checkpoints;
  return i == spec.iterations || (c.save_every > 0 && i % c.save_every == 0);
}

}  // namespace

bool pruned(const Layout& layout, int iteration) {
  std::error_code ec;
  return iteration >= 1 && fs::is_regular_file(marker(layout, iteration), ec);
}

bool kept(const RunSpec& spec, int i, int done) {
  if (!spec.checkpoints || i <= 0 || i >= done) return true;
  if (spec.async && i == done - 1) return true;  // the next rollout samples with it
  if (!saved(spec, i)) return false;
  if (spec.checkpoints->keep_last <= 0) return true;
  int newer = 0;  // saved iterations after i, up to done
  for (int k = i + 1; k <= done; ++k) newer += saved(spec, k) || k == done ? 1 : 0;
  return newer < spec.checkpoints->keep_last;
}

void remove_checkpoints(const RunSpec& spec, const Layout& layout, int i, int done) {
  std::vector<std::string> gone;
  std::error_code ec;
  for (const char* model : {"actor", "critic"}) {
    if (std::string_view(model) == "critic" && !spec.uses_critic()) continue;
    const fs::path checkpoint = layout.checkpoint(i, model);
    const int stages = std::string_view(model) == "actor" ? spec.actor_stages : spec.critic_stages;
    for (const fs::path& stem : {checkpoint, optimizer_path(checkpoint)}) {
      for (const fs::path& f : stage_files(stem, stages)) {
        if (fs::remove(f, ec)) gone.push_back(f.filename().string());
      }
    }
  }
  ordered_json m;
  m["iteration"] = i;
  m["removed"] = gone;
  m["after_iteration"] = done;
  write_text_file(marker(layout, i).string(), m.dump() + "\n");
}

std::vector<int> prune_checkpoints(const RunSpec& spec, const Layout& layout, int done) {
  std::vector<int> removed;
  if (!spec.checkpoints) return removed;
  for (int i = 1; i < done; ++i) {
    if (kept(spec, i, done) || pruned(layout, i)) continue;
    remove_checkpoints(spec, layout, i, done);
    removed.push_back(i);
  }
  if (!removed.empty()) {
    log::info("removed the checkpoints and optimizer state of iteration(s) {} (checkpoints.save_every / keep_last)",
              fmt::join(removed, ", "));
  }
  return removed;
}

}  // namespace braid::driver
