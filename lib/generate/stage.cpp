#include "generate/stage.hpp"

#include "backend/registry.hpp"
#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/cli.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/limits.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "generate/collector.hpp"
#include "generate/generate.hpp"
#include "generate/migrate.hpp"
#include "generate/overcommit.hpp"
#include "data/prompts.hpp"
#include "generate/shard_plan.hpp"
#include "generate/stage_stats.hpp"
#include "io/fingerprint.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <optional>
#include <system_error>

namespace braid::gen {
namespace {

using Clock = std::chrono::steady_clock;

// Decode steps between two counts of the unfinished samples over all ranks (migration).
constexpr std::int64_t kCheckEvery = 8;

void validate(const StageOptions& o, const RankGroup& ranks) {
  validate_stage_options(o);
  if (o.migrate_to < 1) throw UsageError("--migrate-to must be at least 1");
  parse_migrate_threshold(o.migrate_threshold, 1);  // its syntax, before the model loads
  if (!o.migrate_threshold.empty() && ranks.size() > 1 && o.migrate_to >= ranks.size()) {
    throw UsageError(fmt::format("--migrate-to {} leaves no rank to free among {}: give fewer receivers",
                                 o.migrate_to, ranks.size()));
  }
}

// Everything one rank does, in the order it happens.
class StageRun {
 public:
  StageRun(const StageOptions& o, const RankGroup& ranks, const StageHooks& hooks)
      : o_(o), ranks_(ranks), hooks_(hooks) {}

  int run() {
    const auto t_start = Clock::now();
    validate(o_, ranks_);
    stats_.rank = ranks_.rank();
    auto be = backend::make_backend(o_.device, o_.threads);
    auto tokenizer = tok::load_tokenizer(o_.tokenizer);
    auto actor = checkpoint::open_model(o_.actor, *be, {}, /*need_lm_head=*/true, /*need_value_head=*/false, o_.dtype,
                                        {.size = ranks_.tp_size(), .rank = ranks_.tp_rank(), .group = ranks_.tp_group()});
    const auto& cfg = actor.model->config();
    require_positions(o_, cfg);
    require(tokenizer->vocab_size() <= cfg.vocab_size, o_.tokenizer, "",
            fmt::format("has {} tokens, more than the actor's vocab_size {} ({})", tokenizer->vocab_size(),
                        cfg.vocab_size, o_.actor));
    std::vector<std::int32_t> stop;
    if (auto eos = tokenizer->eos()) stop.push_back(*eos);
    else log::warn("the tokenizer has no EOS: every sample runs to --max-new-tokens");

    // Rank 0 reads the file for everyone: under mpirun only rank 0 has stdin ("-").
    std::string text;
    if (ranks_.rank() == 0) text = read_text_file(o_.prompts);
    ranks_.broadcast(text);
    const auto read = data::parse_prompts(text, o_.prompts, {.tokenizer = tokenizer.get(),
                                                       .vocab_size = cfg.vocab_size,
                                                       .max_tokens = cfg.max_position_embeddings,
                                                       .limit = o_.limit,
                                                       .chat_template_from = o_.tokenizer,
                                                       .chat = tok::chat_defaults(o_.tools, o_.chat_template_kwargs)});
    const auto lines = batch_lines(o_, read);
    lines_read_ = static_cast<std::int64_t>(read.size());
    // Each sample holds its prompt's tokens and extra fields: their total is known before any
    // is copied (--samples-per-prompt 1e9 would otherwise end in "out of memory").
    std::uint64_t bytes = 0;
    for (const data::PromptLine& line : lines) {
      bytes += (sizeof(Prompt) + sizeof(io::PromptOrigin) + line.tokens.size() * sizeof(std::int32_t) + line.extra.size()) *
               static_cast<std::uint64_t>(o_.samples_per_prompt);
    }
    require_host_memory(bytes, "--samples-per-prompt", "",
                        fmt::format("{} prompts x {} samples", lines.size(), o_.samples_per_prompt));
    for (const data::PromptLine& line : lines) {
      for (int k = 0; k < o_.samples_per_prompt; ++k) {
        prompts_.push_back({.sample_id = static_cast<std::uint64_t>(prompts_.size()), .tokens = line.tokens});
        origins_.push_back({.line = line.line, .extra = line.extra});
      }
    }
    plan_ = ShardPlan{.prompts = static_cast<std::int64_t>(lines.size()),
                      .samples_per_prompt = o_.samples_per_prompt,
                      .shard_size = o_.shard_size,
                      .dir = o_.out_dir,
                      .prefix = o_.prefix};
    const ordered_json config_doc = stage_config(o_, plan_.prompts, stop, cfg.vocab_size);
    const std::string config = config_doc.dump();
    made_from_ = generation_record(o_, config_doc);
    std::error_code ec;
    std::filesystem::create_directories(o_.out_dir, ec);
    if (ec) throw InputError(o_.out_dir, "", "cannot create the output folder: " + ec.message());

    collector_.emplace(plan_,
                       io::SampleShardMeta{.policy_step = actor.step, .created_by = o_.created_by, .config = config,
                                           .made_from = made_from_},
                       [this](const std::filesystem::path& path, const io::SampleBatch& b) {
                         ready(plan_.shard_of(b.sample_id.front()), path);
                         log::debug("{}wrote {} ({} samples)", who(), path.string(), b.size());
                       },
                       origins_);
    // The other tp ranks of a device generate the same samples (the sampler reads the
    // gathered logits, model/tensor_parallel.hpp) and keep them for a migration; the
    // device's tp rank 0 alone writes and reports.
    if (!writer()) collector_->drop_complete_shards();
    std::vector<Prompt> mine = my_pending_prompts(config, actor.step);
    const std::int64_t pending = total(ranks_.size() > 1 ? ranks_.allgather(static_cast<std::int64_t>(mine.size()))
                                                         : std::vector<std::int64_t>{std::int64_t(mine.size())});
    threshold_ = parse_migrate_threshold(o_.migrate_threshold, pending);
    if (threshold_ > 0 && ranks_.size() == 1) {
      if (lead()) log::info("--migrate-threshold has no effect with one {} (run under mpirun with several)",
                ranks_.tp_size() > 1 ? "device" : "process");
      threshold_ = 0;
    }
    if (lead()) {
      log::info("{} prompts x {} samples = {} samples in {} shards of {}; {} to generate{}{}", plan_.prompts,
                o_.samples_per_prompt, plan_.samples(), plan_.shards(), o_.shard_size, pending,
                ranks_.tp_size() > 1 ? fmt::format(" on {} device(s) of tp {}", ranks_.size(), ranks_.tp_size())
                : ranks_.size() > 1  ? fmt::format(" on {} ranks", ranks_.size())
                                     : "",
                threshold_ > 0 ? fmt::format("; migration to {} {} below {:g} unfinished", o_.migrate_to,
                                             ranks_.tp_size() > 1 ? "device(s)" : "rank(s)", threshold_)
                               : "");
    }

    GenerateOptions gopt{.sampling = o_.sampling,
                         .max_batch = o_.max_batch,
                         .max_new_tokens = o_.max_new_tokens,
                         .stop_tokens = stop,
                         .kv_cache_bytes = kv_cache_bytes(o_),
                         .graphs = o_.cuda_graphs};
    progress_total_ = mine.size();
    if (lead() && pending > 0) {
      progress_.emplace(ranks_.size() > 1 ? "generating (rank 0)" : "generating", progress_total_, "samples");
    }
    gen_start_ = Clock::now();
    generate(*actor.model, gopt, mine);
    collector_->flush();
    stats_.generate_seconds = seconds_since(gen_start_);
    stats_.shards_written = collector_->shards_written();
    if (progress_) progress_->finish();
    if (hooks_.after_generation) stats_.fusion = hooks_.after_generation(stats_.generate_seconds);
    finish_stats(seconds_since(t_start));
    return 0;
  }

 private:
  // A complete shard: its path on stdout, or to the hook.
  void ready(std::int64_t shard, const std::filesystem::path& path) const {
    if (!writer()) return;
    if (hooks_.shard_ready) {
      hooks_.shard_ready(shard, path);
    } else {
      print_shard_path(path.string());
    }
  }

  std::string who() const { return ranks_.who(); }
  // This device's tp rank 0: it writes the shards and the stats, and logs.
  bool writer() const { return ranks_.tp_rank() == 0; }
  bool lead() const { return writer() && ranks_.rank() == 0; }
  static std::int64_t total(const std::vector<std::int64_t>& v) {
    std::int64_t s = 0;
    for (auto x : v) s += x;
    return s;
  }

  // The samples of this rank's shards (round-robin) that are not complete on disk.
  std::vector<Prompt> my_pending_prompts(const std::string& config, std::int64_t step) {
    std::vector<Prompt> mine;
    for (std::int64_t k = ranks_.rank(); k < plan_.shards(); k += ranks_.size()) {
      std::string why;
      const ShardState state = check_existing_shard(plan_, k, prompts_, config, step, &why, origins_, made_from_);
      if (state == ShardState::complete) {
        ++stats_.shards_skipped;
        if (writer()) log::info("{}{} is complete: skipped", who(), plan_.path(k).string());
        // Still printed: a consumer in the pipe (braid-score -) that was interrupted
        // before it scored this shard must get it again, or a finished shard is lost.
        ready(k, plan_.path(k));
        continue;
      }
      if (!why.empty() && writer()) log::warn("{}{} is regenerated: {}", who(), plan_.path(k).string(), why);
      collector_->expect(k);
      for (auto id = plan_.first_sample(k); id < plan_.end_sample(k); ++id) {
        mine.push_back(prompts_[static_cast<std::size_t>(id)]);
      }
    }
    return mine;
  }

  void on_done(Sample&& s) {
    ++stats_.sequences;
    stats_.response_tokens += static_cast<std::int64_t>(s.response.size());
    stats_.tokens += static_cast<std::int64_t>(s.prompt.size() + s.response.size());
    collector_->add(std::move(s));
    if (progress_) progress_->advance(1);
  }

  void add(const GenerateStats& g) {
    stats_.steps += g.steps;
    stats_.prefill_tokens += g.prefill_tokens;
    stats_.prefill_seconds += g.prefill_seconds;
    stats_.decode_seconds += g.decode_seconds;
  }

  StepHook progress_hook() {
    return [this](const StepInfo& i, std::vector<Prompt>&) {
      if (hooks_.poll) hooks_.poll(false);
      sampled_ += i.sampled;
      if (progress_) {
        progress_->set_status(fmt::format("{} running, {}", i.running, format_rate(sampled_ / std::max(1e-9, seconds_since(gen_start_)), "tok")));
      }
      return false;
    };
  }

  void generate(const model::Model& m, const GenerateOptions& gopt, const std::vector<Prompt>& mine) {
    auto done = [this](Sample&& s) { on_done(std::move(s)); };
    const StepHook show = progress_hook();
    if (threshold_ <= 0) {
      add(Generator(m, gopt).run(mine, done, show, &unused_));
      return;
    }
    // Every kCheckEvery steps every rank tells how many samples it has left; all take
    // the same decision from the same numbers, at the same round of the exchange.
    // Not every step: each exchange waits for the slowest rank, and on shared cores
    // that wait (a descheduled peer) cost more than the step itself.
    // A receiver goes on with its own running samples and takes the received ones
    // into the same run: room for them is reserved up front (the longest prompt).
    GenerateOptions opt = gopt;
    for (const Prompt& p : prompts_) {
      opt.reserve_prompt_len = std::max<std::int64_t>(opt.reserve_prompt_len, static_cast<std::int64_t>(p.tokens.size()));
    }
    std::vector<Prompt> rest;
    std::int64_t steps = 0;
    const StepHook watch = [&](const StepInfo& i, std::vector<Prompt>& more) {
      show(i, more);
      if (decision_.now || ++steps % kCheckEvery != 0) return false;
      decision_ = decide_migration(ranks_.allgather(i.running + i.waiting), threshold_, o_.migrate_to);
      if (!decision_.now) return false;
      announce_migration();
      if (!receiver()) return true;  // stop here and hand everything over
      more = take_over();
      return false;
    };
    add(Generator(m, opt).run(mine, done, watch, &rest));
    if (decision_.now) {
      if (!receiver()) hand_over(std::move(rest));
      return;
    }
    while (!decision_.now) {  // done here: keep answering until all are done or migration starts
      if (hooks_.poll) hooks_.poll(true);
      decision_ = decide_migration(ranks_.allgather(0), threshold_, o_.migrate_to);
      if (decision_.remaining == 0) return;
    }
    announce_migration();
    if (!receiver()) {
      hand_over({});
      return;
    }
    // Idle when chosen (m larger than the ranks with samples left): a new run.
    rest = take_over();
    add(Generator(m, opt).run(rest, done, show, &unused_));
  }

  bool receiver() const {
    return std::find(decision_.receivers.begin(), decision_.receivers.end(), ranks_.rank()) != decision_.receivers.end();
  }

  void announce_migration() {
    migration_at_ = seconds_since(gen_start_);
    if (lead()) {
      log::info("migration: {} samples left over all {} (threshold {:g}): {} {} take them over, the other {} "
                "finish",
                decision_.remaining, ranks_.tp_size() > 1 ? "devices" : "ranks", threshold_,
                ranks_.tp_size() > 1 ? "device(s)" : "rank(s)", fmt::join(decision_.receivers, ","),
                ranks_.size() - static_cast<int>(decision_.receivers.size()));
    }
  }

  // A sender's open shards, each whole to receivers[shard mod m].
  void hand_over(std::vector<Prompt> rest) {
    const auto& receivers = decision_.receivers;
    const auto n_recv = static_cast<std::int64_t>(receivers.size());
    stats_.role = "handed over";
    for (int r : receivers) {
      Handover h;
      for (std::int64_t k : collector_->open_shards()) {
        if (receivers[static_cast<std::size_t>(k % n_recv)] != r) continue;
        h.shards.push_back(k);
        for (Sample& s : collector_->release(k)) h.finished.push_back(std::move(s));
        for (Prompt& p : rest) {
          if (plan_.shard_of(static_cast<std::int64_t>(p.sample_id)) == k) h.unfinished.push_back(std::move(p));
        }
      }
      stats_.handed_over += static_cast<std::int64_t>(h.unfinished.size());
      for (const Prompt& p : h.unfinished) stats_.handed_over_partial += !p.response.empty();
      stats_.shards_handed_over += static_cast<std::int64_t>(h.shards.size());
      ranks_.send(r, kTagHandover, pack(h));
    }
    if (writer()) log::info("{}handed {} unfinished samples of {} shards over; done generating", who(), stats_.handed_over,
              stats_.shards_handed_over);
  }

  // A receiver's side: the senders' shards become its own; their unfinished samples
  // come back to be generated here, in sample-id order.
  std::vector<Prompt> take_over() {
    stats_.role = "received";
    const auto& receivers = decision_.receivers;
    std::vector<Prompt> rest;
    std::int64_t finished = 0;
    for (int from = 0; from < ranks_.size(); ++from) {
      if (std::find(receivers.begin(), receivers.end(), from) != receivers.end()) continue;
      Handover h = unpack(ranks_.recv(from, kTagHandover));
      for (std::int64_t k : h.shards) collector_->expect(k);
      stats_.received += static_cast<std::int64_t>(h.unfinished.size());
      finished += static_cast<std::int64_t>(h.finished.size());
      for (Sample& s : h.finished) collector_->add(std::move(s));
      for (Prompt& p : h.unfinished) rest.push_back(std::move(p));
    }
    std::sort(rest.begin(), rest.end(), [](const Prompt& a, const Prompt& b) { return a.sample_id < b.sample_id; });
    progress_total_ += rest.size();
    if (progress_) progress_->set_total(progress_total_);
    if (writer()) log::info("{}took over {} unfinished samples ({} finished ones came with their shards)", who(), rest.size(), finished);
    return rest;
  }

  void finish_stats(double wall) {
    const int writer = decision_.now ? decision_.receivers.front() : 0;
    if (!this->writer()) {  // the tp rank 0s gather and write the figures
      ranks_.finish(writer);
      return;
    }
    std::vector<RankStats> all{stats_};
    if (ranks_.size() > 1) {
      if (ranks_.rank() != writer) {
        ranks_.send(writer, kTagStats, to_json(stats_).dump());
        ranks_.finish(writer);
        return;
      }
      all.clear();
      for (int from = 0; from < ranks_.size(); ++from) {
        all.push_back(from == writer ? stats_ : rank_stats_from_json(json::parse(ranks_.recv(from, kTagStats))));
      }
    }
    std::optional<MigrationStats> mig;
    if (decision_.now) {
      mig = MigrationStats{.threshold = threshold_, .remaining = decision_.remaining, .receivers = decision_.receivers,
                           .at_seconds = migration_at_};
      for (const RankStats& r : all) {
        mig->moved_samples += r.handed_over;
        mig->moved_partial += r.handed_over_partial;
        mig->moved_shards += r.shards_handed_over;
      }
    }
    auto doc = stage_stats(all, mig, wall);
    doc["tp"] = ranks_.tp_size();
    doc["data"] = stream_stats(o_, lines_read_, o_.first_prompt, plan_.prompts);
    const auto& call = doc["calls"]["actor_gen"];
    log::info("{} samples, {} response tokens in {:.1f} s ({}); {} shards written, {} skipped as complete",
              doc["sequences"].get<std::int64_t>(), call["response_tokens"].get<std::int64_t>(),
              call["seconds"].get<double>(), format_rate(call["response_tokens_per_second"].get<double>(), "tok"),
              doc["shards_written"].get<std::int64_t>(), doc["shards_skipped"].get<std::int64_t>());
    if (!o_.stats.empty()) write_text_file(o_.stats, doc.dump(2) + "\n");
    ranks_.finish(writer);
  }

  const StageOptions& o_;
  const RankGroup& ranks_;
  const StageHooks& hooks_;
  std::vector<Prompt> prompts_;  // by sample id
  std::vector<io::PromptOrigin> origins_;  // by sample id: the prompt line and its extra fields
  std::string made_from_;                   // the shards' record (generation_record)
  ShardPlan plan_;
  std::optional<ShardCollector> collector_;
  std::optional<Progress> progress_;
  RankStats stats_;
  double threshold_ = 0;
  MigrationDecision decision_;
  double migration_at_ = 0;
  Clock::time_point gen_start_;
  std::int64_t sampled_ = 0;
  std::uint64_t progress_total_ = 0;
  std::vector<Prompt> unused_;  // a run that is never stopped leaves nothing here
  std::int64_t lines_read_ = 0;
};

}  // namespace

std::int64_t kv_cache_bytes(const StageOptions& o) {
  // A pool given (> 0) stays given however small: rounded up to a whole byte, never read as
  // 0 ("from the free memory"); one too small for a sequence is refused when the pool is sized.
  if (o.kv_cache_mb <= 0) return 0;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(o.kv_cache_mb * double(1 << 20))));
}

void print_shard_path(const std::string& path) { write_stdout_line(path_line(path), "a shard path"); }

void validate_stage_options(const StageOptions& o) {
  if (o.actor.empty()) throw UsageError("--actor CKPT is required");
  if (o.prompts.empty()) throw UsageError("--prompts FILE is required");
  if (o.out_dir.empty()) throw UsageError("-o DIR is required");
  if (o.samples_per_prompt < 1 || o.samples_per_prompt > kMaxSamplesPerPrompt) {
    throw UsageError(fmt::format("--samples-per-prompt must be in [1, {}]", kMaxSamplesPerPrompt));
  }
  if (o.max_new_tokens < 1) throw UsageError("--max-new-tokens must be at least 1");
  if (o.max_batch < 1) throw UsageError("--max-batch must be at least 1");
  if (!(o.kv_cache_mb >= 0)) throw UsageError("--kv-cache-mb must be >= 0 (0: from the free memory)");
  if (o.shard_size < 1) throw UsageError("--shard-size must be at least 1");
  if (o.limit < 0) throw UsageError("--limit must be >= 0 (0: all prompts)");
  if (o.first_prompt < 0) throw UsageError("--first-prompt must be >= 0 (a position of the prompt stream)");
  if (o.batch_prompts < 0) throw UsageError("--batch-prompts must be >= 0 (0: every prompt read)");
  if (o.prefix.empty() || o.prefix.find('/') != std::string::npos) {
    throw UsageError(fmt::format("--prefix must be a plain file name prefix, got '{}'", o.prefix));
  }
  if (o.stats == "-") throw UsageError("--stats -: stdout carries the shard paths; give the stats a file");
  if (o.tp < 1) throw UsageError(fmt::format("--tp must be at least 1, got {}", o.tp));
  if (o.tp > 1 && o.overcommit >= 0) {
    throw UsageError(fmt::format("--overcommit runs in one process, without --tp (got --tp {})", o.tp));
  }
  validate(o.sampling);
  // An option given where nothing reads it is refused, naming it (the option audit,
  // tests/audit/option_effects.tsv).
  const auto given = [&](const char* name) { return cli::was_given(o.options_given, name); };
  for (const char* name : {"--top-p", "--top-k"}) {
    if (given(name) && o.sampling.temperature <= 0) {
      throw UsageError(fmt::format("{}: --temperature 0 decodes greedily, drawing nothing for {} to shape: leave it "
                                   "out or give a temperature",
                                   name, name));
    }
  }
  if (given("--migrate-to") && o.migrate_threshold.empty()) {
    throw UsageError(fmt::format("--migrate-to {}: only with --migrate-threshold (nothing migrates without it)",
                                 o.migrate_to));
  }
}

std::string generation_record(const StageOptions& o, const ordered_json& config) {
  io::MadeFrom m("braid-generate");
  for (const auto& [key, value] : config.items()) {
    if (key == "stage" || key == "actor" || key == "prompts" || key == "tokenizer" || value.is_object()) continue;
    m.set_option(key, value.is_string() ? value.get<std::string>() : cli::canonical_value(value.dump()));
  }
  checkpoint::add_checkpoint_input(m, "actor", o.actor);
  m.add_input_path("prompts", o.prompts);
  m.add_tokenizer(o.tokenizer);
  m.set_output("samples");
  return m.to_json().dump();
}

void require_positions(const StageOptions& o, const model::ModelConfig& cfg) {
  if (o.max_new_tokens >= cfg.max_position_embeddings) {
    throw UsageError(fmt::format("--max-new-tokens {} cannot fit: the actor ({}) has {} positions, and a prompt takes at "
                                 "least one (at most {})",
                                 o.max_new_tokens, o.actor, cfg.max_position_embeddings,
                                 cfg.max_position_embeddings - 1));
  }
}

ordered_json stage_config(const StageOptions& o, std::int64_t prompts, const std::vector<std::int32_t>& stop,
                          std::int32_t vocab_size) {
  ordered_json c;
  c["stage"] = "generate";
  c["samples_per_prompt"] = o.samples_per_prompt;
  c["shard_size"] = o.shard_size;
  c["tokenizer"] = o.tokenizer;
  c["max_new_tokens"] = o.max_new_tokens;
  c["temperature"] = o.sampling.temperature;
  c["top_p"] = o.sampling.top_p;
  c["top_k"] = o.sampling.top_k;
  c["seed"] = o.sampling.seed;
  c["stop_tokens"] = stop;
  c["actor"] = o.actor;
  c["prompts"] = o.prompts;
  c["prompt_count"] = prompts;
  c["vocab_size"] = vocab_size;
  if (o.first_prompt > 0 || o.batch_prompts > 0 || o.prompt_seed) {
    c["first_prompt"] = o.first_prompt;
    c["batch_prompts"] = o.batch_prompts;
    c["prompt_seed"] = o.prompt_seed ? json(*o.prompt_seed) : json(nullptr);
  }
  return c;
}

data::EpochOrder prompt_order(const StageOptions& o, std::int64_t lines) {
  return data::EpochOrder(lines, o.prompt_seed.has_value(), o.prompt_seed.value_or(0));
}

std::vector<data::PromptLine> batch_lines(const StageOptions& o, const std::vector<data::PromptLine>& all) {
  const auto n = static_cast<std::int64_t>(all.size());
  if (o.first_prompt == 0 && (o.batch_prompts == 0 || o.batch_prompts == n) && !o.prompt_seed) return all;
  data::EpochOrder order = prompt_order(o, n);
  std::vector<data::PromptLine> out;
  for (const std::int64_t line : order.lines_at(o.first_prompt, o.batch_prompts > 0 ? o.batch_prompts : n)) {
    out.push_back(all[static_cast<std::size_t>(line)]);
  }
  return out;
}

ordered_json stream_stats(const StageOptions& o, std::int64_t lines, std::int64_t first, std::int64_t taken) {
  ordered_json d;
  d["first_prompt"] = first;
  d["epoch"] = lines > 0 ? first / lines : 0;
  d["prompts"] = taken;
  d["lines"] = lines;
  d["next_prompt"] = first + taken;
  d["shuffled"] = o.prompt_seed.has_value();
  return d;
}

int run_generate_stage(const StageOptions& opt, const RankGroup& ranks, const StageHooks& hooks) {
  if (opt.overcommit >= 0) return run_overcommit_stage(opt, ranks);
  return StageRun(opt, ranks, hooks).run();
}

}  // namespace braid::gen
