// Internal state of the fused pipeline (train/pipeline.hpp), shared by its setup,
// its stream executor and its optimizer step.
#pragma once

#include "train/pipeline.hpp"

#include <deque>
#include <map>
#include <utility>

namespace braid::train {

// One receive buffer of the schedule (pool, id): the RECVs that use it in stream order,
// and the receive posted for the next of them.
struct PipelineRecvBuffer {
  std::vector<float> data;
  std::vector<int> tasks;
  std::size_t next = 0;    // index in tasks of the receive posted (or to post next)
  comm::Request request;
};

struct PipelineModelState {
  PipelineModel spec;
  int sched_index = 0;                 // the model's index in the schedule
  int stage = 0, stages = 1, replica = 0, replicas = 1, per_replica = 1;
  int hidden = 0;
  std::unique_ptr<model::Model> model;
  std::int64_t checkpoint_step = 0;
  std::string config_json;
  std::filesystem::path base;          // LoRA: the base checkpoint the adapters apply to
  std::unique_ptr<optim::AdamW> adamw;
  std::vector<model::Activations> slots;   // as many as the stream keeps in flight
  std::vector<int> free_slots;
  std::vector<int> slot_of;                // per micro-batch of this replica, -1 when none
  std::unique_ptr<comm::Communicator> stage_group;  // this stage over the replicas (K > 1)
  std::unique_ptr<comm::Communicator> tie_group;    // first and last stage of a tied model
  model::Tensor<float>* tied = nullptr;             // the embedding (or its copy) they share

  // One step's: 1 / the units of all its micro-batches (train/objective.hpp), and what
  // accumulates over them.
  double loss_scale = 0;
  LossTotals totals;
  StageTimes times;
  std::int64_t tokens = 0;
};

struct PipelineSend {
  std::vector<float> data;
  comm::Request request;
};

struct FusedPipeline::Impl {
  sched::Problem problem;
  std::vector<sched::Instr> stream;   // this device's
  int device = 0;
  comm::Communicator* comm = nullptr;
  backend::Backend* be = nullptr;
  PipelineOptions opt;
  std::vector<PipelineModelState> models;   // in the caller's order
  std::vector<int> caller_of;               // schedule model index -> caller index
  std::map<std::pair<int, int>, PipelineRecvBuffer> buffers;  // (pool, buffer id)
  std::deque<PipelineSend> sends;
  double wait_seconds = 0;

  // Executes the stream once over the step's micro-batches (pipeline_run.cpp).
  void run_stream(std::span<const std::vector<io::SampleBatch>> micro_batches);
};

}  // namespace braid::train
