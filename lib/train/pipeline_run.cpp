// One pass of a device's instruction stream (train/pipeline.hpp): compute, and the
// activations and gradients moving between devices through the schedule's buffers.
#include "train/pipeline_impl.hpp"

#include "train/lora_dropout.hpp"

#include <chrono>
#include <fmt/format.h>
#include <stdexcept>

namespace braid::train {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

void FusedPipeline::Impl::run_stream(std::span<const std::vector<io::SampleBatch>> micro_batches) {
  const sched::Problem& p = problem;
  auto state_of = [&](int task) -> PipelineModelState& {
    return models[static_cast<std::size_t>(caller_of[static_cast<std::size_t>(p.model[static_cast<std::size_t>(task)])])];
  };
  auto batch_of = [&](int task) -> const io::SampleBatch& {
    const auto t = static_cast<std::size_t>(task);
    const PipelineModelState& ms = state_of(task);
    const int global = p.replica[t] * ms.per_replica + p.micro_batch[t];
    return micro_batches[static_cast<std::size_t>(caller_of[static_cast<std::size_t>(p.model[t])])]
                        [static_cast<std::size_t>(global)];
  };
  // The message a task receives: its micro-batch's rows of the receiving model's width.
  auto message_size = [&](int task) {
    return batch_of(task).token_count() * static_cast<std::size_t>(state_of(task).hidden);
  };
  auto post = [&](PipelineRecvBuffer& buf) {
    if (buf.next >= buf.tasks.size()) return;
    const int task = buf.tasks[buf.next];
    const std::size_t n = message_size(task);
    if (buf.data.size() < n) buf.data.resize(n);
    const int peer = p.device[static_cast<std::size_t>(p.pred[static_cast<std::size_t>(task)])];
    buf.request = comm->irecv(std::span<float>(buf.data.data(), n), peer, task);
  };
  auto slot = [&](int task) -> model::Activations& {
    PipelineModelState& ms = state_of(task);
    const auto j = static_cast<std::size_t>(p.micro_batch[static_cast<std::size_t>(task)]);
    if (ms.slot_of[j] < 0) {
      if (ms.free_slots.empty()) {
        throw std::logic_error(fmt::format("pipeline: model {} has more micro-batches in flight than its {} slots",
                                           ms.spec.name, ms.slots.size()));
      }
      ms.slot_of[j] = ms.free_slots.back();
      ms.free_slots.pop_back();
    }
    return ms.slots[static_cast<std::size_t>(ms.slot_of[j])];
  };
  // The slot of a micro-batch whose F has run here: what SEND_F, B, RECV_B and SEND_B use.
  auto held = [&](const sched::Instr& in) -> model::Activations& {
    PipelineModelState& ms = state_of(in.task);
    const auto j = static_cast<std::size_t>(p.micro_batch[static_cast<std::size_t>(in.task)]);
    if (ms.slot_of[j] < 0) {
      throw std::logic_error(fmt::format("pipeline: device {}: {} of {} micro-batch {} before its forward pass ran here",
                                         device, sched::op_name(in.op), ms.spec.name, j));
    }
    return ms.slots[static_cast<std::size_t>(ms.slot_of[j])];
  };
  auto release = [&](int task) {
    PipelineModelState& ms = state_of(task);
    const auto j = static_cast<std::size_t>(p.micro_batch[static_cast<std::size_t>(task)]);
    ms.free_slots.push_back(ms.slot_of[j]);
    ms.slot_of[j] = -1;
  };
  auto send = [&](int task, const float* device_data, int peer) {
    const std::size_t n = batch_of(task).token_count() * static_cast<std::size_t>(state_of(task).hidden);
    // Reuse a staging vector whose send has completed; otherwise take a new one.
    PipelineSend* s = nullptr;
    for (PipelineSend& cand : sends) {
      if (cand.request.test()) {
        s = &cand;
        break;
      }
    }
    if (!s) s = &sends.emplace_back();
    s->data.resize(n);
    be->copy_to_host(s->data.data(), device_data, n * sizeof(float));
    const int receiver = p.succ[static_cast<std::size_t>(task)];
    if (receiver < 0 || peer == device || p.device[static_cast<std::size_t>(receiver)] != peer) {
      throw std::logic_error(fmt::format("pipeline: device {} sends subtask {}'s output to device {}, which does not "
                                         "consume it", device, task, peer));
    }
    s->request = comm->isend(std::span<const float>(s->data.data(), n), peer, receiver);
  };
  auto receive = [&](const sched::Instr& in) -> PipelineRecvBuffer& {
    const int pool = sched::pool_of(p.model[static_cast<std::size_t>(in.task)], p.kind[static_cast<std::size_t>(in.task)]);
    const auto it = buffers.find({pool, in.buffer});
    if (it == buffers.end()) {
      throw std::logic_error(fmt::format("pipeline: device {}: {} of subtask {} reads buffer {} of pool {}, which no "
                                         "receive was posted on", device, sched::op_name(in.op), in.task, in.buffer, pool));
    }
    PipelineRecvBuffer& buf = it->second;
    if (buf.next >= buf.tasks.size() || buf.tasks[buf.next] != in.task) {
      throw std::logic_error(fmt::format("pipeline: receive buffer {} of pool {} is not posted for task {}", in.buffer,
                                         pool, in.task));
    }
    const auto t0 = Clock::now();
    buf.request.wait();
    wait_seconds += since(t0);
    return buf;
  };
  auto next_receive = [&](PipelineRecvBuffer& buf) {
    ++buf.next;
    post(buf);
  };

  for (auto& entry : buffers) {
    entry.second.next = 0;
    post(entry.second);
  }
  for (PipelineModelState& ms : models) {
    ms.model->zero_grad();
    ms.slot_of.assign(static_cast<std::size_t>(ms.per_replica), -1);
    ms.free_slots.clear();
    for (int i = static_cast<int>(ms.slots.size()) - 1; i >= 0; --i) ms.free_slots.push_back(i);
    ms.totals = {};
    ms.times = {};
    ms.tokens = 0;
  }

  for (const sched::Instr& in : stream) {
    PipelineModelState& ms = state_of(in.task);
    const io::SampleBatch& mb = batch_of(in.task);
    const std::size_t rows = mb.token_count() * static_cast<std::size_t>(ms.hidden);
    switch (in.op) {
      case sched::Op::RECV_F: {
        PipelineRecvBuffer& buf = receive(in);
        be->copy_to_device(slot(in.task).input(), buf.data.data(), rows * sizeof(float));
        next_receive(buf);
        break;
      }
      case sched::Op::F: {
        const auto t0 = Clock::now();
        model::Activations& acts = slot(in.task);
        const LoraDropout dropout(*ms.model, mb, ms.spec.lora_seed, ms.adamw->steps_taken());
        ms.model->forward({mb.tokens, mb.offsets, dropout.draw()}, acts);
        if (ms.model->is_last_stage()) {
          ms.totals.add(ms.spec.objective->loss_and_grad(*ms.model, acts, mb, ms.loss_scale));
        }
        be->synchronize();
        ms.times.forward_seconds += since(t0);
        ++ms.times.micro_batches;
        if (ms.model->is_first_stage()) ms.tokens += static_cast<std::int64_t>(mb.token_count());
        break;
      }
      case sched::Op::SEND_F:
        be->synchronize();
        send(in.task, held(in).output(), in.peer);
        break;
      case sched::Op::RECV_B: {
        PipelineRecvBuffer& buf = receive(in);
        be->copy_to_device(held(in).output_grad(), buf.data.data(), rows * sizeof(float));
        next_receive(buf);
        break;
      }
      case sched::Op::B: {
        const auto t0 = Clock::now();
        ms.model->backward(held(in));
        be->synchronize();
        ms.times.backward_seconds += since(t0);
        // The first stage sends nothing back: its slot is free at once.
        if (ms.model->is_first_stage()) release(in.task);
        break;
      }
      case sched::Op::SEND_B:
        send(in.task, held(in).input_grad(), in.peer);
        release(in.task);
        break;
    }
  }
  const auto t0 = Clock::now();
  for (PipelineSend& s : sends) s.request.wait();
  wait_seconds += since(t0);
}

}  // namespace braid::train
