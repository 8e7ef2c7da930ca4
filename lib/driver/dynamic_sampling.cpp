#include "driver/dynamic_sampling.hpp"

#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "core/files.hpp"
#include "io/sample_shard.hpp"

namespace braid::driver {

namespace fs = std::filesystem;

bool dynamic_sampling(const RunSpec& spec) { return spec.data && spec.data->dynamic_rounds > 0; }

fs::path dynamic_record(const Layout& layout, int iteration) { return layout.iteration_dir(iteration) / "data.json"; }

std::optional<std::int64_t> dynamic_first_prompt(const Layout& layout, int iteration) {
  if (iteration <= 1) return 0;
  std::error_code ec;
  const fs::path prev = dynamic_record(layout, iteration - 1);
  if (!fs::is_regular_file(prev, ec)) return std::nullopt;
  const json d = load_json_file(prev.string());
  if (!d.contains("next_prompt") || !d["next_prompt"].is_number_integer()) return std::nullopt;
  return d["next_prompt"].get<std::int64_t>();
}

RoundCount count_groups(const Layout& layout, int iteration) {
  std::map<std::int64_t, std::set<float>> rewards;  // group -> the rewards its samples got
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout.scored_dir(iteration), ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("scored-") || !name.ends_with(".h5")) continue;
    const io::SampleShard s = io::read_sample_shard(e.path());
    const json cfg = json::parse(s.meta.config, nullptr, false);
    const json& gen = cfg.is_object() && cfg.contains("generate") ? cfg["generate"] : cfg;
    const std::int64_t per = gen.value("samples_per_prompt", std::int64_t{1});
    const std::int64_t first = gen.value("first_prompt", std::int64_t{0});
    for (std::size_t i = 0; i < s.batch.size(); ++i) {
      rewards[first + s.batch.sample_id[i] / std::max<std::int64_t>(per, 1)].insert((*s.batch.reward)[i]);
    }
  }
  RoundCount c;
  for (const auto& [group, r] : rewards) {
    ++c.groups;
    c.kept += r.size() > 1 ? 1 : 0;
  }
  return c;
}

int rounds_done(const RunSpec& spec, const Layout& layout, int iteration) {
  int n = 0;
  std::error_code ec;
  for (int r = 0; r < std::max(1, spec.data ? spec.data->dynamic_rounds : 1); ++r) {
    const std::string stage = r == 0 ? "score" : fmt::format("score-r{}", r);
    if (fs::is_regular_file(layout.stats_file(iteration, stage), ec)) n = r + 1;
  }
  return n;
}

ordered_json record_rounds(const RunSpec& spec, const Layout& layout, int iteration) {
  const std::int64_t first = dynamic_first_prompt(layout, iteration).value_or(0);
  const int rounds = rounds_done(spec, layout, iteration);
  const RoundCount c = count_groups(layout, iteration);
  ordered_json d;
  d["first_prompt"] = first;
  d["rounds"] = rounds;
  d["next_prompt"] = first + std::int64_t(rounds) * spec.data->batch_prompts;
  d["groups"] = c.groups;
  d["kept"] = c.kept;
  const std::string text = d.dump() + "\n";
  const fs::path path = dynamic_record(layout, iteration);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || read_text_file(path.string()) != text) write_text_file(path.string(), text);
  return d;
}

}  // namespace braid::driver
