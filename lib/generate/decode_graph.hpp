// Decode steps replayed as graphs (CUDA graphs): the launches of a whole decode step, a
// few hundred kernels for a 16-layer model, issued once at capture and then replayed as
// one launch, so that small decode batches are not bound by the host's launch rate.
//
// One graph per batch-size bucket (1, 2, 4, … up to max_rows, and max_rows): a step of B
// sequences runs the graph of the smallest bucket >= B, its extra rows inert (model.hpp,
// prepare_cached's pad_to). The step's inputs (token ids, positions, cache slots, block
// tables, the sampling draws) are copied into the same device buffers before each replay;
// inside the graph nothing allocates or waits for the host. The graph ends with the
// sampling op, so only the token ids and logprobs come back.
//
// Before the first capture, one step at the largest bucket runs eagerly with every row
// inert: the backend's per-stream scratch then has its final size, and no captured
// pointer moves later (the graphs run on a stream of their own, whose scratch nothing else
// grows). A capture that the backend refuses turns graphs off for the run with a warning
// (the step then runs eagerly); GenerateStats::graph_steps says how many steps replayed.
#pragma once

#include "generate/sampler.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <map>
#include <span>

namespace braid::gen {

class DecodeGraphs {
 public:
  // Whether a run should use graphs: the option, the backend has them, the model is not
  // tensor parallel, and the environment's BRAID_CUDA_GRAPHS is not "0".
  static bool wanted(const model::Model& m, bool option);

  DecodeGraphs(const model::Model& m, model::KVCache& cache, model::Activations& acts, RowSampler& sampler,
               int max_rows);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // One decode step: segments are one token each, of sequences already in the cache.
  // out[i] is segment i's sample. Returns false (and does nothing) once graphs are off.
  bool step(std::span<const std::int32_t> tokens, std::span<const model::Segment> segments,
            std::span<SequenceSampler* const> samplers, std::span<Sampled> out);
  int bucket(int rows) const;
  std::int64_t graphs() const { return static_cast<std::int64_t>(graphs_.size()); }

 private:
  void warm_up();
  bool capture(int rows);

  const model::Model* m_;
  model::KVCache* cache_;
  model::Activations* acts_;
  RowSampler* sampler_;
  int max_rows_;
  backend::OwnedStream stream_;
  std::map<int, backend::Graph> graphs_;
  bool warm_ = false, off_ = false;
};

}  // namespace braid::gen
