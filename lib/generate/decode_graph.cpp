#include "generate/decode_graph.hpp"

#include "core/log.hpp"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

namespace braid::gen {

bool DecodeGraphs::wanted(const model::Model& m, bool option) {
  const char* env = std::getenv("BRAID_CUDA_GRAPHS");
  if (env && std::strcmp(env, "0") == 0) return false;
  return option && m.backend().supports_graphs() && m.tensor_parallel().size <= 1;
}

DecodeGraphs::DecodeGraphs(const model::Model& m, model::KVCache& cache, model::Activations& acts,
                           RowSampler& sampler, int max_rows)
    : m_(&m), cache_(&cache), acts_(&acts), sampler_(&sampler), max_rows_(max_rows), stream_(m.backend()) {}

DecodeGraphs::~DecodeGraphs() {
  for (auto& [rows, g] : graphs_) m_->backend().destroy_graph(g);
}

int DecodeGraphs::bucket(int rows) const {
  int b = 1;
  while (b < rows) b *= 2;
  return b < max_rows_ ? b : max_rows_;
}

void DecodeGraphs::warm_up() {
  const int rows = max_rows_;
  m_->prepare_cached({}, {}, *cache_, *acts_, rows);
  m_->run_cached(*cache_, *acts_);
  sampler_->upload_draws({}, static_cast<std::size_t>(rows));
  sampler_->sample_on_device(acts_->logits(), static_cast<std::size_t>(rows), m_->config().vocab_size);
  m_->backend().synchronize(stream_);
  warm_ = true;
}

bool DecodeGraphs::capture(int rows) {
  backend::Backend& be = m_->backend();
  try {
    be.begin_capture(stream_);
  } catch (const std::exception& e) {
    log::warn("CUDA graphs off for this run: {}", e.what());
    off_ = true;
    return false;
  }
  try {
    m_->run_cached(*cache_, *acts_);
    sampler_->sample_on_device(acts_->logits(), static_cast<std::size_t>(rows), m_->config().vocab_size);
    graphs_[rows] = be.end_capture(stream_);
    return true;
  } catch (const std::exception& e) {
    try {
      backend::Graph g = be.end_capture(stream_);
      be.destroy_graph(g);
    } catch (const std::exception&) {
    }
    log::warn("CUDA graphs off for this run: capturing the decode step of {} rows failed: {}", rows, e.what());
    off_ = true;
    return false;
  }
}

bool DecodeGraphs::step(std::span<const std::int32_t> tokens, std::span<const model::Segment> segments,
                        std::span<SequenceSampler* const> samplers, std::span<Sampled> out) {
  if (off_) return false;
  backend::Backend& be = m_->backend();
  backend::StreamScope scope(be, stream_);
  if (!warm_) warm_up();
  const int rows = bucket(static_cast<int>(segments.size()));
  m_->prepare_cached(tokens, segments, *cache_, *acts_, rows);
  sampler_->upload_draws(samplers, static_cast<std::size_t>(rows));
  if (!graphs_.count(rows) && !capture(rows)) {
    // Inputs are in place: this step runs eagerly, later ones without graphs.
    m_->run_cached(*cache_, *acts_);
    sampler_->sample_on_device(acts_->logits(), static_cast<std::size_t>(rows), m_->config().vocab_size);
    sampler_->download(out);
    return true;
  }
  be.launch(graphs_.at(rows), stream_);
  sampler_->download(out);
  return true;
}

}  // namespace braid::gen
