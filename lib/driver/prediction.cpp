#include "driver/prediction.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "driver/run_file.hpp"
#include "generate/stage.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/cost_model.hpp"
#include "plan/run_model.hpp"
#include "sched/bound.hpp"
#include "sched/lower.hpp"
#include "sched/problem.hpp"
#include "sched/schedule_json.hpp"
#include "score/command.hpp"
#include "train/options.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

std::int64_t flag_int(const ToolFlags& flags, std::string_view flag, std::int64_t dflt) {
  for (const auto& [f, v] : flags) {
    if (f == flag) return std::stoll(v);
  }
  return dflt;
}

// A sample shard as braid-generate writes it (tokens, the actor's logprobs, offsets, the
// prompts' lines and fields: io/sample_shard.hpp) and as braid-score adds its arrays (the
// reference's logprobs, values, rewards, advantages, returns): bytes per token, datasets.
constexpr double kGeneratedBytesPerToken = 16;
constexpr double kScoredBytesPerToken = 40;
constexpr double kGeneratedDatasets = 10;
constexpr double kScoredDatasets = 15;

// What a prediction needs besides the run: the plan's experiment, cluster and profile.
struct Inputs {
  plan::Experiment experiment;
  plan::Cluster cluster;
  plan::Profile profile;
};

std::optional<Inputs> load_inputs(const RunPlan& rp, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return std::nullopt;
  };
  if (!rp.experiment || !rp.cluster) return fail("the plan names no experiment and cluster braid can read");
  if (!rp.profile && rp.hardware.empty()) return fail("the plan names no profile");
  Inputs in;
  in.experiment = plan::load_experiment(rp.experiment->string());
  in.cluster = plan::load_cluster(rp.cluster->string());
  if (rp.profile) {
    in.profile = plan::load_profile(rp.profile->string());
  } else {
    std::vector<plan::ModelShape> shapes;
    for (const auto& m : in.experiment.models) shapes.push_back(m.shape);
    in.profile = plan::analytic_profile(plan::load_hardware(rp.hardware), shapes);
  }
  return in;
}

// Per model of the run: the bytes its processes move and touch.
struct ModelBytes {
  double params = 0;
  double tensors = 0;
  double file() const { return 4 * params; }          // a checkpoint holds f32 values
  double resident() const { return 8 * params; }      // the compute copy and the f32 gradients
  double optimizer() const { return 8 * params; }     // AdamW's two f32 moments
};

class Builder {
 public:
  Builder(const RunSpec& spec, const Inputs& in) : spec_(spec), in_(in), cm_(in.experiment, in.profile, in.cluster) {
    const plan::HostCosts& h = in.profile.host;
    host_ = h;
    threads_ = spec.threads.value_or(0);
    if (threads_ <= 0) threads_ = std::max(1, h.cores);
  }

  Prediction build(Fusions f) {
    Prediction p;
    p.fusions = f;
    p.host = host_.measured();
    if (!p.host) p.notes.push_back("the profile has no host costs (braid-profile measure writes them): passes only");
    rollout(p);
    train(p);
    for (const auto& s : p.steps) p.iteration += s.seconds;
    return p;
  }

 private:
  int batch() const { return in_.experiment.global_batch; }
  double tokens() const { return batch() * cm_.mean_total(); }
  // A decoder layer is 9 tensors (4 attention products, 3 MLP products, 2 norms); then
  // the embedding, the final norm and the head.
  ModelBytes bytes(const std::string& role) const {
    const auto& shape = cm_.model(role).shape;
    return {shape.total_params(), 9.0 * static_cast<double>(shape.layers) + 3};
  }
  bool has(const std::string& role) const { return in_.experiment.model(role) != nullptr; }
  const plan::ModelProfile& prof(const std::string& role) const { return cm_.model(role); }

  // A model opened for a pass: its file read, its weights and gradients touched.
  double open(const std::string& role) const {
    const ModelBytes b = bytes(role);
    return host_.read(b.file(), 1, b.tensors) + host_.touch(b.resident());
  }
  // Buffers of a pass over micro-batches of `tokens` tokens (activations of every layer when training).
  double activations(const std::string& role, double tokens, bool training) const {
    const auto& m = prof(role);
    return host_.touch(tokens * m.memory.act_per_token * (training ? m.shape.layers : 1));
  }
  double start(int ranks, bool mpirun) const { return host_.start(ranks, mpirun); }

  std::vector<std::string> scored_roles() const {
    std::vector<std::string> roles;
    if (spec_.ref.kind != ModelSource::Kind::absent && has("ref")) roles.push_back("ref");
    if (spec_.uses_critic() && has("critic")) roles.push_back("critic");
    if ((spec_.reward.kind == ModelSource::Kind::checkpoint || spec_.reward.kind == ModelSource::Kind::init) &&
        has("reward")) {
      roles.push_back("reward");
    }
    return roles;
  }

  double inference(const std::string& role, int replicas, int tp) const {
    const std::int64_t micro_tokens = flag_int(spec_.score, "--micro-tokens", score::CommandOptions{}.micro_tokens);
    const int per_replica = ceil_div(batch(), replicas);
    const int seqs = std::max(1, static_cast<int>(micro_tokens / std::max(1.0, cm_.mean_total())));
    const plan::Call call{role + "_inf", role, plan::CallKind::inference};
    const plan::Strategy s{replicas, tp, 1, std::max(1, ceil_div(per_replica, seqs))};
    return cm_.estimate(call, plan::Mesh{0, replicas * tp}, s).time;
  }

  void rollout(Prediction& p) {
    const int ranks = std::max(1, spec_.rollout_ranks);
    const int tp = std::max(1, spec_.rollout_tp);
    const int replicas = std::max(1, ranks / tp);
    const gen::StageOptions dflt;
    const int max_batch = static_cast<int>(flag_int(spec_.generate, "--max-batch", dflt.max_batch));
    const int shard_size = static_cast<int>(flag_int(spec_.generate, "--shard-size", dflt.shard_size));
    const int per_replica = ceil_div(batch(), replicas);
    const plan::Strategy gs{replicas, tp, 1, std::max(1, ceil_div(per_replica, max_batch))};
    const plan::Mesh gm{0, replicas * tp};
    const plan::GenTimeline gt = cm_.gen_timeline(gm, gs);
    const double gen = gt.end;
    const int shards = ceil_div(batch(), shard_size);
    const double shard_tokens = tokens() / shards;
    const int rank_threads = threads_;

    // The generator's buffers: its KV cache (the batch's slots at the longest length) and activations.
    const auto& actor = prof("actor");
    const double longest = in_.experiment.prompt_len.upper() +
                           flag_int(spec_.generate, "--max-new-tokens", static_cast<std::int64_t>(in_.experiment.response_len.upper()));
    const double kv = std::min(per_replica, max_batch) * longest * actor.memory.kv_per_token * actor.shape.layers / tp;
    const double gen_setup = open("actor") + host_.touch(kv) +
                             activations("actor", std::min(2048.0, per_replica * cm_.mean_prompt()), false);
    const double gen_files = host_.write(shards / static_cast<double>(replicas) * shard_tokens * kGeneratedBytesPerToken,
                                         ceil_div(shards, replicas), kGeneratedDatasets);

    const auto roles = scored_roles();
    const bool fused = spec_.fuse && replicas > 1;
    const int score_ranks = fused ? ranks : std::max(1, spec_.score_ranks);
    const int score_tp = fused ? tp : std::max(1, spec_.score_tp);
    const int score_replicas = std::max(1, score_ranks / score_tp);
    double score_setup = 0, score_compute = 0;
    std::vector<std::pair<std::string, double>> inf;
    const std::int64_t micro_tokens = flag_int(spec_.score, "--micro-tokens", score::CommandOptions{}.micro_tokens);
    for (const auto& r : roles) {
      const double t = inference(r, score_replicas, score_tp);
      inf.emplace_back(r + "_inf", t);
      score_compute += t;
      score_setup += open(r) + activations(r, static_cast<double>(micro_tokens), false);
    }
    // Each shard read, scored and written again by the rank that scores it.
    const double per_shard_files = host_.read(shard_tokens * kGeneratedBytesPerToken, 1, kGeneratedDatasets) +
                                   host_.write(shard_tokens * kScoredBytesPerToken, 1, kScoredDatasets);

    std::vector<plan::Task> t;
    std::vector<int> gen_tasks, score_tasks;
    const bool mpi_gen = ranks > 1;
    const int g_start = plan::add(t, {.name = "generate start", .lane = 0, .work = start(ranks, mpi_gen), .threads = 0});
    const int g_setup = plan::add(t, {.name = "generate setup", .lane = 0,
                                      .work = gen_setup + (fused ? score_setup : 0), .threads = ranks * rank_threads,
                                      .after = {g_start}});
    double files = gen_files;
    PredictedStep step{.name = "rollout"};
    step.start = start(ranks, mpi_gen);
    step.setup = gen_setup + (fused ? score_setup : 0);
    if (fused) {
      // Every rank generates its share, then scores shards until none is left (no
      // migration on a CPU, where a decode step's cost grows with its batch).
      gen_tasks.push_back(plan::add(t, {.name = "generate", .lane = 0, .work = gen + gen_files,
                                        .threads = ranks * rank_threads, .after = {g_setup}}));
      const double scoring = score_compute + per_shard_files * shards / score_replicas;
      score_tasks.push_back(plan::add(t, {.name = "score", .lane = 0, .work = scoring, .threads = ranks * rank_threads,
                                          .after = {gen_tasks.back()}}));
      files += per_shard_files * shards / score_replicas;
      if (spec_.migrate_threshold) p.notes.push_back("the fused rollout's migration is not modelled: on a CPU it gains nothing");
    } else {
      // Shards as generation finishes them: every replica ends its shards at the same
      // fractions of its call; a piped braid-score takes each as it comes.
      const auto ends = plan::shard_end_fractions(cm_.response_lengths(), per_replica, shard_size, max_batch);
      double done = 0;
      for (std::size_t k = 0; k < ends.size(); ++k) {
        const double at = k + 1 == ends.size() ? gen : plan::time_at_fraction(gt, ends[k]);
        const double work = std::max(0.0, at - done) + gen_files / ends.size();
        done = std::max(done, at);
        gen_tasks.push_back(plan::add(t, {.name = fmt::format("generate to shard {}", k), .lane = 0, .work = work,
                                          .threads = ranks * rank_threads,
                                          .after = {k == 0 ? g_setup : gen_tasks.back()}}));
      }
      const bool mpi_score = score_ranks > 1;
      const double per_shard = score_compute * score_replicas / shards + per_shard_files;
      if (mpi_score) {
        // braid-score under mpirun over every shard once generation has ended.
        const int s_start = plan::add(t, {.name = "score start", .lane = 1, .work = start(score_ranks, true),
                                          .threads = 0, .after = {gen_tasks.back()}});
        const int s_setup = plan::add(t, {.name = "score setup", .lane = 1, .work = score_setup,
                                          .threads = score_ranks * rank_threads, .after = {s_start}});
        score_tasks.push_back(plan::add(t, {.name = "score", .lane = 1, .work = per_shard * shards / score_replicas,
                                            .threads = score_ranks * rank_threads, .after = {s_setup}}));
      } else {
        const int s_start = plan::add(t, {.name = "score start", .lane = 1, .work = start(1, false), .threads = 0});
        const int s_setup = plan::add(t, {.name = "score setup", .lane = 1, .work = score_setup,
                                          .threads = rank_threads, .after = {s_start}});
        // Shard k of each replica arrives when the replicas reach it: replicas x shards per replica.
        int prev = s_setup;
        for (std::size_t k = 0; k < gen_tasks.size(); ++k) {
          for (int r = 0; r < replicas && static_cast<int>(k) * replicas + r < shards; ++r) {
            prev = plan::add(t, {.name = fmt::format("score shard {}", k * replicas + r), .lane = 1, .work = per_shard,
                                 .threads = rank_threads, .after = {gen_tasks[k], prev}});
            score_tasks.push_back(prev);
          }
        }
      }
      files += per_shard_files * shards / score_replicas;
    }
    const plan::Timeline tl = plan::simulate_shared(t, host_.cores);
    step.seconds = tl.makespan;
    step.files = files;
    p.steps.push_back(step);
    const double gen_wall = tl.end[static_cast<std::size_t>(gen_tasks.back())] -
                            tl.start[static_cast<std::size_t>(gen_tasks.front())];
    p.calls.emplace_back("actor_gen", gen_wall);
    const double stretch = tl.stretch(t, score_tasks);
    for (const auto& [name, seconds] : inf) p.calls.emplace_back(name, seconds * stretch);
  }

  // The fused pipeline's time per optimizer step: the schedule's makespan when it is made,
  // else braid-schedgen's lower bound of the plan's schedspec (what the schedule reaches or nears).
  double fused_step(std::string* source) const {
    if (spec_.schedule) {
      std::error_code ec;
      if (fs::is_regular_file(*spec_.schedule, ec)) {
        const json doc = load_json_file(spec_.schedule->string());
        if (doc.contains("makespan") && doc["makespan"].is_number() && spec_.plan_schedule) {
          *source = "schedule";
          return doc["makespan"].get<double>() / 1e3;
        }
        if (doc.contains("spec")) {
          // A schedule of the run file's: its structure costed with this profile (its own
          // stage times may be anyone's), scaled by how near its makespan came to its bound.
          const sched::LoadedSchedule ls = sched::load_schedule(doc, spec_.schedule->string());
          const double own_bound = sched::lower_bound(ls.problem).value;
          *source = "the run file's schedule, re-costed";
          return restaged_bound(ls.problem.spec) * (own_bound > 0 ? ls.makespan / own_bound : 1.0);
        }
      }
    }
    if (spec_.run_plan && spec_.run_plan->schedspec.is_object()) {
      *source = "lower bound";
      const sched::SchedSpec s = sched::parse_schedspec(spec_.run_plan->schedspec.dump(), "the plan's schedspec");
      return sched::lower_bound(sched::build_problem(s)).value / 1e3;
    }
    *source = "none";
    return 0;
  }

  // Per model of the fused training (by name: actor, critic), the most micro-batches in
  // flight on one device, as braid-train sizes its activation slots: from the made
  // schedule's streams, else what a one-forward-one-backward pipeline holds on its first
  // stage (min(stages, micro-batches) of the plan's schedspec).
  std::map<std::string, int> pipeline_slots() const {
    std::map<std::string, int> most;
    std::error_code ec;
    if (spec_.schedule && fs::is_regular_file(*spec_.schedule, ec)) {
      const sched::LoadedSchedule ls = sched::load_schedule(load_json_file(spec_.schedule->string()),
                                                            spec_.schedule->string());
      for (std::size_t m = 0; m < ls.problem.spec.models.size(); ++m) {
        int& slots = most[ls.problem.spec.models[m].name];
        for (const auto& stream : ls.lowered.streams) {
          slots = std::max(slots, sched::activations_in_flight(ls.problem, stream, static_cast<int>(m)));
        }
      }
    } else if (spec_.run_plan && spec_.run_plan->schedspec.is_object()) {
      for (const auto& m : spec_.run_plan->schedspec["models"]) {
        most[m.value("name", std::string())] = std::min(m.value("stages", 1), m.value("micro_batches", 1));
      }
    }
    return most;
  }

  // The lower bound of a schedule's structure with stage times from this profile.
  double restaged_bound(sched::SchedSpec s) const {
    const int mini = static_cast<int>(flag_int(spec_.train, "--mini-batch", batch()));
    for (auto& m : s.models) {
      const std::string role = m.name;
      if (!has(role)) continue;
      const double samples = static_cast<double>(mini) / m.replicas / m.micro_batches;
      const auto st = cm_.train_stages(role, m.stages, 1, m.replicas, false, samples,
                                       static_cast<int>(flag_int(spec_.train, "--recompute", 0)));
      for (int k = 0; k < m.stages; ++k) {
        m.fwd[static_cast<std::size_t>(k)] = st.fwd[static_cast<std::size_t>(k)] * 1e3;
        m.bwd[static_cast<std::size_t>(k)] = st.bwd[static_cast<std::size_t>(k)] * 1e3;
      }
    }
    return sched::lower_bound(sched::build_problem(s)).value / 1e3;
  }

  void train(Prediction& p) {
    const bool fused = p.fusions.intra && spec_.uses_critic();
    const int ranks = std::max(1, spec_.ranks);
    const int tp = std::max(1, spec_.train_tp);
    const int mini = static_cast<int>(flag_int(spec_.train, "--mini-batch", batch()));
    const int epochs = static_cast<int>(flag_int(spec_.train, "--epochs", 1));
    const int steps = ceil_div(batch(), mini) * epochs;
    const std::int64_t micro_tokens = flag_int(spec_.train, "--micro-tokens", train::CommonTrainOptions{}.micro_tokens);
    std::vector<std::string> roles{"actor"};
    if (spec_.uses_critic()) roles.push_back("critic");

    double setup = 0, finish = 0, compute = 0;
    std::vector<std::pair<std::string, double>> calls;
    // Each model: its checkpoint and optimizer state read (the state is there from the
    // second iteration on, the iterations this predicts), AdamW's moments and the training
    // activations touched; at the end both written again. A pipeline rank holds its stages.
    // The fused pipeline keeps as many activation slots of each model as micro-batches are
    // in flight on a device (the schedule's streams), each for --micro-tokens.
    const std::map<std::string, int> slots = fused ? pipeline_slots() : std::map<std::string, int>{};
    for (const auto& r : roles) {
      const ModelBytes b = bytes(r);
      const double share = fused ? 1.0 / std::max(1, ranks / tp) : 1.0;
      const double slot_count = slots.contains(r) ? std::max(1, slots.at(r)) : 1;
      setup += (open(r) + host_.touch(b.optimizer()) + host_.read(b.optimizer(), 1, 2 * b.tensors) +
                activations(r, static_cast<double>(micro_tokens), true) * slot_count) * share;
      finish += host_.write(b.file(), 1, b.tensors) + host_.write(b.optimizer(), 1, 2 * b.tensors);
    }
    const int shards = ceil_div(batch(), static_cast<int>(flag_int(spec_.generate, "--shard-size",
                                                                   gen::StageOptions{}.shard_size)));
    const double reads = host_.read(tokens() * kScoredBytesPerToken, shards, kScoredDatasets);
    std::string source;
    if (fused) {
      double sync = 0;
      const auto& schedspec = spec_.run_plan ? spec_.run_plan->schedspec : json();
      for (const auto& r : roles) {
        int stages = 1, replicas = 1, micro = 1;
        if (schedspec.is_object()) {
          for (const auto& m : schedspec["models"]) {
            if (m.value("name", "") == r) {
              stages = m.value("stages", 1);
              replicas = m.value("replicas", 1);
              micro = m.value("micro_batches", 1);
            }
          }
        }
        const double samples = static_cast<double>(mini) / replicas / micro;
        sync += cm_.train_stages(r, stages, tp, replicas, false, samples).sync;   // recomputation costs no sync
      }
      compute = steps * (fused_step(&source) + sync);
      for (const auto& r : roles) calls.emplace_back(r + "_train", compute);
      p.notes.push_back("fused training per step: " + source);
    } else {
      const int replicas = std::max(1, ranks / tp);
      const int per_replica = ceil_div(mini, replicas);
      const int seqs = std::max(1, static_cast<int>(micro_tokens / std::max(1.0, cm_.mean_total())));
      for (const auto& r : roles) {
        const plan::Call call{r + "_train", r, plan::CallKind::train};
        const plan::Strategy s{replicas, tp, 1, std::max(1, ceil_div(per_replica, seqs)),
                               static_cast<int>(flag_int(spec_.train, "--recompute", 0))};
        const double t = cm_.estimate(call, plan::Mesh{0, replicas * tp}, s).time;
        calls.emplace_back(r + "_train", t);
        compute += t;
      }
    }
    const bool mpi = ranks > 1 || fused;
    std::vector<plan::Task> t;
    const int s0 = plan::add(t, {.name = "train start", .lane = 0, .work = start(ranks, mpi), .threads = 0});
    const int s1 = plan::add(t, {.name = "train setup", .lane = 0, .work = setup + reads,
                                 .threads = ranks * threads_, .after = {s0}});
    const int s2 = plan::add(t, {.name = "train", .lane = 0, .work = compute, .threads = ranks * threads_, .after = {s1}});
    plan::add(t, {.name = "train save", .lane = 0, .work = finish, .threads = threads_, .after = {s2}});
    const plan::Timeline tl = plan::simulate_shared(t, host_.cores);
    p.steps.push_back({.name = "train", .seconds = tl.makespan, .start = start(ranks, mpi), .setup = setup,
                       .files = reads + finish});
    const double stretch = tl.stretch(t, {s2});
    for (const auto& [name, seconds] : calls) p.calls.emplace_back(name, seconds * stretch);
  }

  const RunSpec& spec_;
  const Inputs& in_;
  plan::CostModel cm_;
  plan::HostCosts host_;
  int threads_ = 1;
};

}  // namespace

std::string fusions_name(Fusions f) {
  if (f.inter && f.intra) return "fused";
  if (f.inter) return "inter-stage";
  if (f.intra) return "intra-stage";
  return "serial";
}

Fusions fusions_of(const RunSpec& spec) {
  return {spec.fuse || spec.migrate_threshold.has_value(), spec.plan_schedule || spec.schedule.has_value()};
}

double Prediction::call(const std::string& name) const {
  for (const auto& [n, s] : calls) {
    if (n == name) return s;
  }
  return -1;
}

ordered_json Prediction::to_json() const {
  auto r = [](double v) { return std::round(v * 1e4) / 1e4; };
  ordered_json j;
  j["name"] = fusions_name(fusions);
  std::vector<std::string> f;
  if (fusions.inter) f.emplace_back("inter_stage");
  if (fusions.intra) f.emplace_back("intra_stage");
  j["fusions"] = f;
  ordered_json calls_j = ordered_json::object();
  for (const auto& [n, s] : calls) calls_j[n] = r(s);
  j["calls"] = calls_j;
  ordered_json steps_j = ordered_json::object();
  for (const auto& s : steps) {
    steps_j[s.name] = {{"seconds", r(s.seconds)}, {"start", r(s.start)}, {"setup", r(s.setup)}, {"files", r(s.files)}};
  }
  j["steps"] = steps_j;
  j["iteration"] = r(iteration);
  j["host_costs"] = host;
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

std::optional<Prediction> predict_iteration(const RunSpec& spec, std::string* why) {
  if (!spec.run_plan || !spec.run_plan->applied) {
    if (why) *why = "the run has no plan";
    return std::nullopt;
  }
  std::optional<Inputs> in;
  try {
    in = load_inputs(*spec.run_plan, why);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
  if (!in) return std::nullopt;
  return Builder(spec, *in).build(fusions_of(spec));
}

Fusions choose_fusions(const std::vector<Prediction>& predictions, std::string* reason) {
  const auto faster = [](const Prediction& x, const Prediction& y) { return x.iteration < y.iteration; };
  const auto best = std::min_element(predictions.begin(), predictions.end(), faster);
  const auto serial = std::find_if(predictions.begin(), predictions.end(),
                                   [](const Prediction& p) { return p.fusions == Fusions{}; });
  const bool tie = serial != predictions.end() && serial != best &&
                   best->iteration > (1 - kFusionLead) * serial->iteration;
  const auto chosen = tie ? serial : best;
  std::string why = fmt::format("predicted {:.3f} s an iteration {}", best->iteration, fusions_name(best->fusions));
  for (auto p = predictions.begin(); p != predictions.end(); ++p) {
    if (p != best) why += fmt::format(", {:.3f} s {}", p->iteration, fusions_name(p->fusions));
  }
  if (tie) why += fmt::format(": a lead under {:.0f}% of serial's, so serial", 100 * kFusionLead);
  if (reason != nullptr) *reason = why;
  return chosen->fusions;
}

ordered_json prediction_document(const std::vector<Prediction>& variants, Fusions chosen, const std::string& reason) {
  ordered_json doc;
  doc["format"] = "braid.prediction";
  doc["version"] = 1;
  doc["chosen"] = fusions_name(chosen);
  doc["reason"] = reason;
  ordered_json v = ordered_json::array();
  for (const auto& p : variants) v.push_back(p.to_json());
  doc["variants"] = v;
  return doc;
}

}  // namespace braid::driver
