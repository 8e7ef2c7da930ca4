#include "generate/overcommit.hpp"

#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "generate/deferred.hpp"
#include "generate/generate.hpp"
#include "generate/migrate.hpp"
#include "data/prompts.hpp"
#include "generate/stage.hpp"
#include "generate/stage_stats.hpp"
#include "io/sample_shard.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <set>
#include <system_error>

namespace braid::gen {
namespace {

using Clock = std::chrono::steady_clock;

// A finished sample and the policy step of each of its response tokens.
struct Finished {
  Sample sample;
  std::vector<std::int64_t> steps;
};

class OvercommitRun {
 public:
  OvercommitRun(const StageOptions& o, const RankGroup& ranks) : o_(o), ranks_(ranks) {}

  int run() {
    const auto t_start = Clock::now();
    validate();
    auto be = backend::make_backend(o_.device, o_.threads);
    auto tokenizer = tok::load_tokenizer(o_.tokenizer);
    auto actor = checkpoint::open_model(o_.actor, *be, {}, /*need_lm_head=*/true, /*need_value_head=*/false, o_.dtype);
    step_ = actor.step;
    const auto& cfg = actor.model->config();
    require_positions(o_, cfg);
    vocab_size_ = cfg.vocab_size;
    require(tokenizer->vocab_size() <= cfg.vocab_size, o_.tokenizer, "",
            fmt::format("has {} tokens, more than the actor's vocab_size {} ({})", tokenizer->vocab_size(),
                        cfg.vocab_size, o_.actor));
    if (auto eos = tokenizer->eos()) stop_.push_back(*eos);
    else log::warn("the tokenizer has no EOS: every sample runs to --max-new-tokens");
    lines_ = data::read_prompts(o_.prompts, {.tokenizer = tokenizer.get(),
                                       .vocab_size = cfg.vocab_size,
                                       .max_tokens = cfg.max_position_embeddings,
                                       .limit = o_.limit,
                                       .chat_template_from = o_.tokenizer,
                                       .chat = tok::chat_defaults(o_.tools, o_.chat_template_kwargs)});
    const auto read = static_cast<std::int64_t>(lines_.size());
    batch_groups_ = o_.batch_prompts > 0 ? o_.batch_prompts : read;
    order_.emplace(prompt_order(o_, read));
    config_ = config_text();
    made_from_ = generation_record(o_, ordered_json::parse(config_));

    // 1. What the previous iteration left: resumed first, in sample-id order.
    std::vector<Prompt> prompts;
    std::int64_t cursor = 0;
    std::set<std::int64_t> carried_groups;
    if (!o_.resume_deferred.empty()) {
      Deferred d = read_deferred(o_.resume_deferred);
      check_deferred(d);
      cursor = d.next_prompt;
      for (DeferredSample& s : d.samples) {
        carried_groups.insert(group_of(s.prompt.sample_id));
        if (s.finished) {
          ++stats_.carried_finished;
          Finished f{.sample = Sample{.sample_id = s.prompt.sample_id, .prompt = std::move(s.prompt.tokens),
                                      .response = std::move(s.prompt.response), .logprobs = std::move(s.prompt.logprobs),
                                      .raw_logprobs = std::move(s.prompt.raw_logprobs), .finish = s.finish},
                     .steps = std::move(s.policy_steps)};
          pending_finished_.push_back(std::move(f));
          continue;
        }
        ++stats_.carried_unfinished;
        stats_.carried_tokens += static_cast<std::int64_t>(s.prompt.response.size());
        old_steps_[s.prompt.sample_id] = std::move(s.policy_steps);
        prompts.push_back(std::move(s.prompt));
      }
    }
    clear_old_shards();
    // 2. Fresh prompts from the stream, up to B + D groups in all.
    const std::int64_t capacity = batch_groups_ + o_.overcommit;
    const std::int64_t fresh = std::max<std::int64_t>(0, capacity - static_cast<std::int64_t>(carried_groups.size()));
    for (std::int64_t p = cursor; p < cursor + fresh; ++p) {
      const data::PromptLine& line = line_of(p);
      for (int k = 0; k < o_.samples_per_prompt; ++k) {
        prompts.push_back({.sample_id = static_cast<std::uint64_t>(p * o_.samples_per_prompt + k), .tokens = line.tokens});
      }
    }
    stats_.fresh = fresh * o_.samples_per_prompt;
    first_prompt_ = cursor;
    next_prompt_ = cursor + fresh;
    log::info("overcommit: a batch of {} groups x {} samples; {} groups started ({} fresh from prompt {}, {} carried: "
              "{} samples resumed with {} tokens kept, {} finished waiting for their group)",
              batch_groups_, o_.samples_per_prompt, carried_groups.size() + static_cast<std::size_t>(fresh), fresh,
              cursor, carried_groups.size(), stats_.carried_unfinished, stats_.carried_tokens, stats_.carried_finished);

    // 3. Generate until the batch is full.
    for (Finished& f : pending_finished_) book(std::move(f));
    pending_finished_.clear();
    std::vector<Prompt> unfinished;
    gen_start_ = Clock::now();
    if (batch_full()) {
      unfinished = std::move(prompts);  // the carried finished groups already fill it
    } else if (!prompts.empty()) {
      GenerateOptions gopt{.sampling = o_.sampling, .max_batch = o_.max_batch, .max_new_tokens = o_.max_new_tokens,
                           .stop_tokens = stop_, .kv_cache_bytes = kv_cache_bytes(o_), .graphs = o_.cuda_graphs};
      const StepHook full = [this](const StepInfo&, std::vector<Prompt>&) { return batch_full(); };
      const GenerateStats g = Generator(*actor.model, gopt).run(
          prompts, [this](Sample&& s) { on_done(std::move(s)); }, full, &unfinished);
      rank_.steps = g.steps;
      rank_.prefill_tokens = g.prefill_tokens;
      rank_.prefill_seconds = g.prefill_seconds;
      rank_.decode_seconds = g.decode_seconds;
    }
    if (!batch_full()) {
      throw std::logic_error(fmt::format("overcommit: {} of {} groups whole after every sample finished",
                                         batch_.size(), batch_groups_));
    }
    write_shard();  // the last, short one
    rank_.generate_seconds = seconds_since(gen_start_);

    // 4. The rest waits for the next iteration.
    Deferred out{.policy_step = step_, .next_prompt = next_prompt_, .config = config_, .samples = {}};
    for (Prompt& p : unfinished) {
      DeferredSample s;
      s.policy_steps = steps_of(p.sample_id, p.response.size());
      stats_.deferred_partial += p.response.empty() ? 0 : 1;
      s.prompt = std::move(p);
      out.samples.push_back(std::move(s));
    }
    for (auto& [g, samples] : groups_) {
      for (Finished& f : samples) {
        ++stats_.deferred_finished;
        out.samples.push_back(DeferredSample{
            .prompt = Prompt{.sample_id = f.sample.sample_id, .tokens = std::move(f.sample.prompt),
                             .response = std::move(f.sample.response), .logprobs = std::move(f.sample.logprobs),
                             .raw_logprobs = std::move(f.sample.raw_logprobs)},
            .policy_steps = std::move(f.steps), .finished = true, .finish = f.sample.finish});
      }
    }
    std::sort(out.samples.begin(), out.samples.end(),
              [](const DeferredSample& a, const DeferredSample& b) { return a.prompt.sample_id < b.prompt.sample_id; });
    stats_.deferred = static_cast<std::int64_t>(out.samples.size());
    write_deferred(o_.deferred_out, out);
    log::info("overcommit: {} groups in the batch ({} samples, {} shards); {} samples deferred to {} ({} with part of "
              "a response, {} finished in groups not yet whole)",
              batch_.size(), rank_.sequences, rank_.shards_written, stats_.deferred, o_.deferred_out,
              stats_.deferred_partial, stats_.deferred_finished);
    finish_stats(seconds_since(t_start));
    return 0;
  }

 private:
  void validate() const {
    validate_stage_options(o_);
    if (o_.deferred_out.empty()) throw UsageError("--overcommit needs --deferred-out FILE (what is not in the batch goes there)");
    if (ranks_.size() > 1) throw UsageError("--overcommit runs in one process (not under mpirun) for now");
    if (!o_.migrate_threshold.empty()) throw UsageError("--overcommit and --migrate-threshold do not go together yet");
  }

  std::string config_text() const {
    ordered_json c = stage_config(o_, batch_groups_, stop_, vocab_size_);
    c["overcommit"] = o_.overcommit;
    c["resume_deferred"] = o_.resume_deferred;
    return c.dump();
  }

  // This stage's shards from an interrupted attempt: the batch is made again whole.
  void clear_old_shards() const {
    std::error_code ec;
    std::filesystem::create_directories(o_.out_dir, ec);
    if (ec) throw InputError(o_.out_dir, "", "cannot create the output folder: " + ec.message());
    for (const auto& e : std::filesystem::directory_iterator(o_.out_dir)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with(o_.prefix + "-") && name.ends_with(".h5")) {
        log::info("{}: from an earlier attempt: removed (the batch is generated again from the same inputs)",
                  e.path().string());
        std::filesystem::remove(e.path());
      }
    }
  }

  void check_deferred(const Deferred& d) const {
    const std::string file = o_.resume_deferred;
    const json theirs = json::parse(d.config);
    const json ours = json::parse(config_);
    for (const char* key : kDeferredSettingKeys) {
      if (theirs.value(key, json()) != ours.value(key, json())) {
        throw InputError(file, std::string("config.") + key,
                         fmt::format("is {} there, {} here: a deferred sample continues only under the settings "
                                     "that started it",
                                     theirs.value(key, json()).dump(), ours.value(key, json()).dump()));
      }
    }
    if (d.policy_step > step_) {
      throw InputError(file, "policy_step", fmt::format("is {}, newer than the actor's step {}", d.policy_step, step_));
    }
    for (const DeferredSample& s : d.samples) {
      const auto& want = line_of(group_of(s.prompt.sample_id)).tokens;
      if (s.prompt.tokens != want) {
        throw InputError(file, fmt::format("sample {}", s.prompt.sample_id),
                         "has another prompt than this run's prompt file gives it (the prompt file or --limit changed "
                         "between iterations)");
      }
      if (s.prompt.response.size() >= static_cast<std::size_t>(o_.max_new_tokens) && !s.finished) {
        throw InputError(file, fmt::format("sample {}", s.prompt.sample_id), "is unfinished at --max-new-tokens");
      }
    }
  }

  std::int64_t group_of(std::uint64_t id) const { return static_cast<std::int64_t>(id) / o_.samples_per_prompt; }
  // Stream position p's prompt (data/order.hpp).
  const data::PromptLine& line_of(std::int64_t p) const { return lines_[static_cast<std::size_t>(order_->line_at(p))]; }
  bool batch_full() const { return static_cast<std::int64_t>(batch_.size()) >= batch_groups_; }

  std::vector<std::int64_t> steps_of(std::uint64_t id, std::size_t tokens) {
    std::vector<std::int64_t> steps;
    if (auto it = old_steps_.find(id); it != old_steps_.end()) steps = std::move(it->second);
    steps.resize(tokens, step_);
    return steps;
  }

  void on_done(Sample&& s) {
    Finished f{.sample = std::move(s), .steps = {}};
    f.steps = steps_of(f.sample.sample_id, f.sample.response.size());
    book(std::move(f));
  }

  // A finished sample joins its group; a whole group joins the batch while it has room.
  void book(Finished&& f) {
    const std::int64_t g = group_of(f.sample.sample_id);
    auto& samples = groups_[g];
    samples.push_back(std::move(f));
    if (static_cast<int>(samples.size()) < o_.samples_per_prompt || batch_full()) return;
    std::sort(samples.begin(), samples.end(),
              [](const Finished& a, const Finished& b) { return a.sample.sample_id < b.sample.sample_id; });
    batch_.push_back(g);
    for (Finished& x : samples) {
      rank_.sequences += 1;
      rank_.response_tokens += static_cast<std::int64_t>(x.sample.response.size());
      rank_.tokens += static_cast<std::int64_t>(x.sample.prompt.size() + x.sample.response.size());
      shard_.push_back(std::move(x));
    }
    groups_.erase(g);
    if (static_cast<int>(shard_.size()) >= o_.shard_size) write_shard();
  }

  void write_shard() {
    if (shard_.empty()) return;
    io::SampleBatch b;
    b.logprobs_actor.emplace();
    b.policy_step.emplace();
    b.origin.emplace();
    std::vector<std::int32_t> seq;
    for (const Finished& f : shard_) {
      const Sample& s = f.sample;
      seq = s.prompt;
      seq.insert(seq.end(), s.response.begin(), s.response.end());
      b.add(seq, static_cast<std::int32_t>(s.prompt.size()), static_cast<std::int64_t>(s.sample_id));
      const auto n = static_cast<std::ptrdiff_t>(s.response.size());
      std::copy(s.raw_logprobs.begin(), s.raw_logprobs.end(), b.logprobs_actor->end() - n);
      std::copy(f.steps.begin(), f.steps.end(), b.policy_step->end() - n);
      const data::PromptLine& line = line_of(group_of(s.sample_id));
      b.origin->back() = io::PromptOrigin{.line = line.line, .extra = line.extra};
    }
    const auto path = std::filesystem::path(o_.out_dir) / fmt::format("{}-{:05}.h5", o_.prefix, rank_.shards_written);
    io::write_sample_shard(path, b,
                           {.policy_step = step_, .created_by = o_.created_by, .config = config_, .made_from = made_from_});
    ++rank_.shards_written;
    shard_.clear();
    print_shard_path(path.string());
  }

  void finish_stats(double wall) {
    rank_.role = "overcommit";
    const RankStats ranks[] = {rank_};
    ordered_json doc = stage_stats(ranks, std::nullopt, wall);
    doc["overcommit"] = ordered_json{{"extra_groups", o_.overcommit},
                                     {"batch_groups", batch_groups_},
                                     {"batch_samples", rank_.sequences},
                                     {"fresh_samples", stats_.fresh},
                                     {"resumed_samples", stats_.carried_unfinished},
                                     {"resumed_tokens", stats_.carried_tokens},
                                     {"carried_finished", stats_.carried_finished},
                                     {"deferred_samples", stats_.deferred},
                                     {"deferred_partial", stats_.deferred_partial},
                                     {"deferred_finished", stats_.deferred_finished},
                                     {"next_prompt", next_prompt_}};
    doc["data"] = stream_stats(o_, static_cast<std::int64_t>(lines_.size()), first_prompt_, next_prompt_ - first_prompt_);
    if (!o_.stats.empty()) write_text_file(o_.stats, doc.dump(2) + "\n");
  }

  struct Counts {
    std::int64_t fresh = 0, carried_unfinished = 0, carried_tokens = 0, carried_finished = 0;
    std::int64_t deferred = 0, deferred_partial = 0, deferred_finished = 0;
  };

  const StageOptions& o_;
  const RankGroup& ranks_;
  std::int64_t step_ = 0;
  std::vector<std::int32_t> stop_;
  std::vector<data::PromptLine> lines_;
  std::int64_t batch_groups_ = 0;
  std::int32_t vocab_size_ = 0;   // the actor's (recorded in meta.config)
  mutable std::optional<data::EpochOrder> order_;  // its epochs' permutations are made when first asked
  std::int64_t next_prompt_ = 0;
  std::int64_t first_prompt_ = 0;
  std::string config_;
  std::string made_from_;   // the shards' record (generation_record)
  std::map<std::uint64_t, std::vector<std::int64_t>> old_steps_;  // resumed samples' earlier tokens' steps
  std::vector<Finished> pending_finished_;
  std::map<std::int64_t, std::vector<Finished>> groups_;  // finished samples of groups not in the batch
  std::vector<std::int64_t> batch_;                       // the batch's groups, in the order they became whole
  std::vector<Finished> shard_;                           // the shard being filled
  RankStats rank_;
  Counts stats_;
  Clock::time_point gen_start_;
};

}  // namespace

int run_overcommit_stage(const StageOptions& opt, const RankGroup& ranks) { return OvercommitRun(opt, ranks).run(); }

}  // namespace braid::gen
