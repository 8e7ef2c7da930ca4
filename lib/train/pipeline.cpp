#include "train/pipeline_impl.hpp"

#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "sched/dryrun.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <stdexcept>

namespace braid::train {
namespace {

void open_stage(PipelineModelState& ms, const sched::Problem& p, int device, backend::Backend& be,
                const PipelineOptions& opt) {
  const sched::ModelSpec& spec = p.spec.models[static_cast<std::size_t>(ms.sched_index)];
  ms.stages = spec.stages;
  ms.replicas = spec.replicas;
  ms.per_replica = spec.micro_batches;
  ms.stage = p.stage_on(ms.sched_index, device);
  ms.replica = p.replica_on(ms.sched_index, device);

  const io::WeightShardSet shards(checkpoint::files_of_tp_rank(checkpoint::checkpoint_files(ms.spec.checkpoint), opt.tp));
  const model::ModelConfig cfg = checkpoint::config_of(shards);
  if (ms.stages > cfg.num_hidden_layers) {
    throw InputError(opt.schedule_origin, fmt::format("spec.models[{}].stages", ms.sched_index),
                     fmt::format("{} stages of {}, whose checkpoint {} has {} layers", ms.stages, ms.spec.name,
                                 ms.spec.checkpoint.string(), cfg.num_hidden_layers));
  }
  const auto layers = checkpoint::split_layers(cfg.num_hidden_layers, ms.stages)[static_cast<std::size_t>(ms.stage)];
  checkpoint::OpenedModel opened = checkpoint::open_model(ms.spec.checkpoint, be, layers,
                                                          ms.spec.objective->needs_lm_head(),
                                                          ms.spec.objective->needs_value_head(), ms.spec.dtype, opt.tp,
                                                          ms.spec.lora);
  // Fresh adapters on a base: the same A at any stage and tp split (model.hpp).
  if (ms.spec.lora.enabled() && !checkpoint::read_adapter_file(ms.spec.checkpoint))
    opened.model->init_adapters(ms.spec.lora_seed);
  ms.model = std::move(opened.model);
  ms.checkpoint_step = opened.step;
  ms.config_json = opened.config_json;
  ms.base = opened.base;
  ms.hidden = cfg.hidden_size;
  ms.adamw = std::make_unique<optim::AdamW>(be, checkpoint::trained_tensors(*ms.model), ms.spec.adamw,
                                            optim::DataParallel{}, ms.model->tensor_parallel());
}

// One adapter file of every stage's adapters (collective over the pipeline's communicator):
// each stage's whole adapters (gathered over the tp group) from replica 0, gathered over the
// devices of tp rank 0; its rank 0 writes them in layer order, named and shaped as at tp 1.
void save_adapter_file(const FusedPipeline::Impl& im, const PipelineModelState& ms, const std::filesystem::path& out,
                       const checkpoint::SaveInfo& info) {
  std::vector<float> mine;
  if (ms.replica == 0) {
    for (const checkpoint::AdapterTensor& t : checkpoint::whole_adapters(*ms.model))
      mine.insert(mine.end(), t.values.begin(), t.values.end());
  }
  // The tp ranks hold the same whole adapters: tp rank 0's devices gather them.
  if (im.opt.tp.rank != 0) return;
  const std::int64_t head[2] = {ms.replica == 0 ? ms.stage : -1, std::int64_t(mine.size())};
  const std::vector<std::int64_t> heads = im.comm->all_gather(std::span<const std::int64_t>(head, 2));
  std::vector<std::size_t> counts;
  std::vector<std::size_t> at(std::size_t(ms.stages), 0);
  std::size_t offset = 0;
  for (int r = 0; r < im.comm->size(); ++r) {
    const std::int64_t stage = heads[std::size_t(2 * r)], n = heads[std::size_t(2 * r + 1)];
    if (stage >= 0) at[std::size_t(stage)] = offset;
    counts.push_back(std::size_t(n));
    offset += std::size_t(n);
  }
  std::vector<float> all(offset);
  std::size_t own = 0;
  for (int r = 0; r < im.comm->rank(); ++r) own += counts[std::size_t(r)];
  std::copy(mine.begin(), mine.end(), all.begin() + std::ptrdiff_t(own));
  im.comm->all_gather_varying(std::span<float>(all), counts);
  if (im.comm->rank() != 0) return;
  const model::ModelConfig& cfg = ms.model->config();
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, ms.stages);
  std::vector<checkpoint::AdapterTensor> tensors;
  for (int s = 0; s < ms.stages; ++s) {
    model::ModelOptions o = ms.model->options();
    o.layers = ranges[std::size_t(s)];
    o.tp = {};
    std::size_t pos = at[std::size_t(s)];
    for (const model::TensorInfo& t : model::adapter_layout(cfg, o)) {
      std::size_t n = 1;
      for (auto d : t.full_shape) n *= std::size_t(d);
      tensors.push_back({t.name, t.full_shape, {all.begin() + std::ptrdiff_t(pos), all.begin() + std::ptrdiff_t(pos + n)}});
      pos += n;
    }
  }
  checkpoint::write_adapter_file(out, ms.model->options().lora, ms.base, info, {0, cfg.num_hidden_layers}, tensors);
}

}  // namespace

FusedPipeline::FusedPipeline(const sched::LoadedSchedule& given, comm::Communicator& comm, backend::Backend& be,
                             std::vector<PipelineModel> models, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  // A multiple of the schedule's devices runs that many copies of it, data parallel
  // (sched::tile_schedule: a plan's identical fused groups, scheduled once).
  const int d0 = given.problem.devices;
  const int groups = comm.size() > d0 && comm.size() % d0 == 0 ? comm.size() / d0 : 1;
  const sched::LoadedSchedule schedule = sched::tile_schedule(given, groups);
  im.problem = schedule.problem;
  im.comm = &comm;
  im.be = &be;
  im.opt = std::move(options);
  const sched::Problem& p = im.problem;
  const std::string& origin = im.opt.schedule_origin;
  if (p.devices != comm.size()) {
    throw InputError(origin, "spec.devices",
                     im.opt.tp.size > 1
                         ? fmt::format("the schedule is for {} devices but the {} ranks at --tp {} make {} device{} "
                                       "(mpirun -np {} with --tp {})",
                                       p.devices, comm.size() * im.opt.tp.size, im.opt.tp.size, comm.size(),
                                       comm.size() == 1 ? "" : "s", p.devices * im.opt.tp.size, im.opt.tp.size)
                         : fmt::format("the schedule is for {} devices but {} MPI ranks run it (mpirun -np {}, or a "
                                       "multiple of it: copies of the schedule, data parallel)",
                                       p.devices, comm.size(), p.devices));
  }
  // The streams as braid-schedgen --verify runs them, on every rank (each holds the whole
  // schedule) and before any message moves: a stream that would crash or deadlock here
  // is refused alike everywhere.
  if (const sched::DryRun run = sched::dry_run(p, schedule.lowered); !run.ok) {
    throw InputError(origin, "devices", fmt::format("the instruction streams do not run: {}", run.problem));
  }
  if (p.num_tasks - 1 > comm.max_tag()) {
    throw InputError(origin, "devices", fmt::format("{} subtasks: more than the {} message tags the communicator has",
                                                    p.num_tasks, comm.max_tag()));
  }
  std::vector<std::string> problems;
  im.caller_of.assign(p.spec.models.size(), -1);
  for (std::size_t i = 0; i < models.size(); ++i) {
    if (!models[i].objective) throw std::invalid_argument("FusedPipeline: model " + models[i].name + " has no objective");
    const auto it = std::find_if(p.spec.models.begin(), p.spec.models.end(),
                                 [&](const sched::ModelSpec& m) { return m.name == models[i].name; });
    if (it == p.spec.models.end()) {
      problems.push_back(fmt::format("spec.models: no model named \"{}\"", models[i].name));
      continue;
    }
    im.caller_of[static_cast<std::size_t>(it - p.spec.models.begin())] = static_cast<int>(i);
  }
  for (std::size_t m = 0; m < p.spec.models.size(); ++m) {
    if (im.caller_of[m] < 0) {
      problems.push_back(fmt::format("spec.models[{}]: \"{}\" is scheduled but not trained here", m,
                                     p.spec.models[m].name));
    }
  }
  if (!problems.empty()) throw InputError(origin, problems);

  im.device = comm.rank();
  im.stream = schedule.lowered.streams[static_cast<std::size_t>(im.device)];
  im.models.resize(models.size());
  for (std::size_t m = 0; m < p.spec.models.size(); ++m) {
    PipelineModelState& ms = im.models[static_cast<std::size_t>(im.caller_of[m])];
    ms.spec = std::move(models[static_cast<std::size_t>(im.caller_of[m])]);
    ms.sched_index = static_cast<int>(m);
    open_stage(ms, p, im.device, be, im.opt);
    const int slots = sched::activations_in_flight(p, im.stream, ms.sched_index);
    for (int i = 0; i < slots; ++i) {
      ms.slots.push_back(ms.model->make_activations(
          {.max_tokens = im.opt.max_tokens, .max_sequences = im.opt.max_sequences, .training = true,
           .recompute = im.opt.recompute}));
    }
    // Replicas of one stage average their gradients; split is collective, so every rank
    // takes part for every model (a single replica needs no group).
    if (ms.replicas > 1) ms.stage_group = comm.split(ms.stage, ms.replica);
    // Tied embeddings over several stages: the first stage's embedding and the last
    // stage's copy of it as LM head are one parameter, so their gradients are summed
    // (unless it is frozen under LoRA adapters).
    if (ms.stages > 1 && ms.model->config().tie_word_embeddings && !ms.model->options().lora.enabled()) {
      const bool end = ms.stage == 0 || ms.stage == ms.stages - 1;
      ms.tie_group = comm.split(end ? ms.replica : -1, ms.stage);
      if (end) ms.tied = ms.model->find("model.embed_tokens.weight");
    }
  }
  for (const sched::Instr& in : im.stream) {
    if (in.op != sched::Op::RECV_F && in.op != sched::Op::RECV_B) continue;
    const auto t = static_cast<std::size_t>(in.task);
    im.buffers[{sched::pool_of(p.model[t], p.kind[t]), in.buffer}].tasks.push_back(in.task);
  }
}

FusedPipeline::~FusedPipeline() = default;

int FusedPipeline::micro_batches(int model) const {
  const PipelineModelState& ms = impl_->models.at(static_cast<std::size_t>(model));
  return ms.replicas * ms.per_replica;
}

model::Model& FusedPipeline::stage(int model) { return *impl_->models.at(static_cast<std::size_t>(model)).model; }
optim::AdamW& FusedPipeline::optimizer(int model) { return *impl_->models.at(static_cast<std::size_t>(model)).adamw; }
int FusedPipeline::stage_index(int model) const { return impl_->models.at(static_cast<std::size_t>(model)).stage; }
int FusedPipeline::stages(int model) const { return impl_->models.at(static_cast<std::size_t>(model)).stages; }
int FusedPipeline::replica(int model) const { return impl_->models.at(static_cast<std::size_t>(model)).replica; }
std::int64_t FusedPipeline::checkpoint_step(int model) const {
  return impl_->models.at(static_cast<std::size_t>(model)).checkpoint_step;
}
StageTimes FusedPipeline::stage_times(int model) const { return impl_->models.at(static_cast<std::size_t>(model)).times; }

PipelineStepResult FusedPipeline::step(std::span<const std::vector<io::SampleBatch>> micro_batches,
                                       std::span<const double> lr) {
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n_models = im.models.size();
  if (micro_batches.size() != n_models || lr.size() != n_models) {
    throw std::invalid_argument(fmt::format("FusedPipeline::step: {} models, given {} micro-batch lists and {} rates",
                                            n_models, micro_batches.size(), lr.size()));
  }
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < n_models; ++i) {
    const PipelineModelState& ms = im.models[i];
    const int want = ms.replicas * ms.per_replica;
    if (static_cast<int>(micro_batches[i].size()) != want) {
      problems.push_back(fmt::format(
          "spec.models[{}].micro_batches: the schedule runs {} ({} replica(s) x {}) micro-batches of {}; the data has {}",
          ms.sched_index, want, ms.replicas, ms.per_replica, ms.spec.name, micro_batches[i].size()));
      continue;
    }
    for (std::size_t k = 0; k < micro_batches[i].size(); ++k) {
      const io::SampleBatch& mb = micro_batches[i][k];
      if (mb.size() == 0) {
        throw std::invalid_argument(fmt::format("micro-batch {} of {} has no sequences", k, ms.spec.name));
      }
      if (static_cast<std::int64_t>(mb.token_count()) > im.opt.max_tokens ||
          static_cast<std::int64_t>(mb.size()) > im.opt.max_sequences) {
        throw std::invalid_argument(fmt::format("micro-batch {} of {} has {} tokens / {} sequences, over {} / {}", k,
                                                ms.spec.name, mb.token_count(), mb.size(), im.opt.max_tokens,
                                                im.opt.max_sequences));
      }
    }
  }
  if (!problems.empty()) throw InputError(im.opt.schedule_origin, problems);
  // Every rank holds every micro-batch, so each knows the mini-batch's units.
  std::vector<double> units(n_models, 0.0);
  for (std::size_t i = 0; i < n_models; ++i) {
    units[i] = total_units(*im.models[i].spec.objective, micro_batches[i]);
    im.models[i].loss_scale = units[i] > 0 ? 1.0 / units[i] : 0.0;
  }

  im.wait_seconds = 0;
  const auto stream_t0 = std::chrono::steady_clock::now();
  try {
    im.run_stream(micro_batches);
  } catch (const std::exception& e) {
    if (im.comm->size() == 1) throw;
    // Peers are blocked on this rank's messages: nothing but ending the job frees them.
    log::error("rank {}: {}", im.comm->rank(), e.what());
    const bool bad_input = dynamic_cast<const InputError*>(&e) || dynamic_cast<const std::invalid_argument*>(&e);
    im.comm->abort(bad_input ? 2 : 1);
  }
  const double stream_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stream_t0).count();

  // Per model: replicas' gradients summed (each already carries 1/units), then the global norm.
  std::vector<double> sums(3 * n_models, 0.0);  // grad², loss, compute seconds
  std::vector<std::int64_t> tokens(n_models, 0);
  for (std::size_t i = 0; i < n_models; ++i) {
    PipelineModelState& ms = im.models[i];
    if (ms.stage_group) {
      ms.stage_group->all_reduce_sum(ms.model->options().lora.enabled() ? ms.model->adapter_gradients()
                                                                        : ms.model->gradients());
    }
    double sq = 0;
    if (ms.tie_group && ms.tied) {
      ms.tie_group->all_reduce_sum(std::span<float>(ms.tied->grad, static_cast<std::size_t>(ms.tied->numel)));
      // The norm counts the shared tensor once: on the first stage.
      if (ms.stage != 0) sq = -im.be->ops<float>().sum_squares(ms.tied->numel, ms.tied->grad);
    }
    // After the sum every replica holds the same gradient: count each stage once.
    sums[3 * i] = (ms.adamw->grad_sq_norm(1.0) + sq) / ms.replicas;
    sums[3 * i + 1] = ms.totals.loss_sum();
    sums[3 * i + 2] = ms.times.forward_seconds + ms.times.backward_seconds;
    tokens[i] = ms.tokens;
  }
  // Under tp each rank's Σg² holds its slices (and the replicated tensors on tp rank 0):
  // the norm is over the whole model. Losses and tokens are the same on every tp rank.
  if (im.opt.tp.group != nullptr) {
    std::vector<double> sq(n_models);
    for (std::size_t i = 0; i < n_models; ++i) sq[i] = sums[3 * i];
    im.opt.tp.group->all_reduce_sum(std::span<double>(sq));
    for (std::size_t i = 0; i < n_models; ++i) sums[3 * i] = sq[i];
  }
  im.comm->all_reduce_sum(std::span<double>(sums));
  im.comm->all_reduce_sum(std::span<std::int64_t>(tokens));

  PipelineStepResult out;
  out.models.resize(n_models);
  for (std::size_t i = 0; i < n_models; ++i) {
    PipelineModelState& ms = im.models[i];
    PipelineModelResult& r = out.models[i];
    r.grad_norm = std::sqrt(sums[3 * i]);
    r.clip = ms.adamw->step_with_norm(lr[i], 1.0, r.grad_norm);
    r.compute_seconds = sums[3 * i + 2];
    r.tokens = tokens[i];
    // The metrics of the last stages (one per replica), merged as LossTotals merges them.
    // Metric names as the last stage of replica 0 knows them; every rank reduces in that order.
    const int root = im.problem.device_of(ms.sched_index, 0, ms.stages - 1);
    std::string names;
    for (const auto& [k, v] : ms.totals.metric_sums()) names += k + '\n';
    im.comm->broadcast(names, root);
    std::vector<std::string> keys;
    for (std::size_t b = 0, e; (e = names.find('\n', b)) != std::string::npos; b = e + 1) keys.push_back(names.substr(b, e - b));
    // Sums add over the ranks (0 where a rank has none); maxima take the largest. The
    // metrics' units ride at the end of the sums.
    std::vector<double> sums_of(keys.size() + 1, 0.0), maxima(keys.size(), std::numeric_limits<double>::lowest());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const auto it = ms.totals.metric_sums().find(keys[k]);
      if (it == ms.totals.metric_sums().end()) continue;
      (LossTotals::is_max(keys[k]) ? maxima : sums_of)[k] = it->second;
    }
    sums_of.back() = ms.totals.metric_units();
    im.comm->all_reduce(std::span<double>(sums_of), comm::ReduceOp::sum);
    im.comm->all_reduce(std::span<double>(maxima), comm::ReduceOp::max);
    std::map<std::string, double> merged;
    for (std::size_t k = 0; k < keys.size(); ++k) merged[keys[k]] = LossTotals::is_max(keys[k]) ? maxima[k] : sums_of[k];
    LossTotals all;
    all.merge(sums[3 * i + 1], units[i], sums_of.back(), merged);
    r.stats = all.mean();
  }

  const std::vector<double> times{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                                  im.wait_seconds, stream_seconds};
  std::vector<double> all(times.size() * static_cast<std::size_t>(im.comm->size()), 0.0);
  std::copy(times.begin(), times.end(), all.begin() + static_cast<std::ptrdiff_t>(times.size() * static_cast<std::size_t>(im.comm->rank())));
  im.comm->all_reduce_sum(std::span<double>(all));
  for (int r = 0; r < im.comm->size(); ++r) {
    const auto at = times.size() * static_cast<std::size_t>(r);
    out.wall_seconds = std::max(out.wall_seconds, all[at]);
    out.wait_seconds += all[at + 1];
    out.stream_seconds = std::max(out.stream_seconds, all[at + 2]);
  }
  return out;
}

std::vector<std::filesystem::path> FusedPipeline::save(std::span<const std::filesystem::path> outs,
                                                       const std::string& created_by,
                                                       std::span<const std::string> made_from) {
  Impl& im = *impl_;
  if (outs.size() != im.models.size()) {
    throw std::invalid_argument(fmt::format("FusedPipeline::save: {} models, {} outputs", im.models.size(), outs.size()));
  }
  std::vector<std::filesystem::path> files;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const PipelineModelState& ms = im.models[i];
    const model::TensorParallel& tp = im.opt.tp;
    const checkpoint::SaveInfo info{.step = ms.checkpoint_step + 1, .created_by = created_by,
                                    .config_json = ms.config_json,
                                    .made_from = i < made_from.size() ? made_from[i] : std::string()};
    if (ms.model->options().lora.enabled()) {
      save_adapter_file(im, ms, outs[i], info);
      files.push_back(outs[i]);
      continue;
    }
    if (ms.replica == 0) {
      checkpoint::save_weights(*ms.model, checkpoint::stage_path(checkpoint::tp_path(outs[i], tp.rank, tp.size), ms.stage, ms.stages),
                               info);
    }
    for (int r = 0; r < tp.size; ++r) {
      for (const auto& f : checkpoint::stage_paths(checkpoint::tp_path(outs[i], r, tp.size), ms.stages)) files.push_back(f);
    }
  }
  im.comm->barrier();
  return files;
}

}  // namespace braid::train
