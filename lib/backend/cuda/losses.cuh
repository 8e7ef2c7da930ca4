// The RL losses on CUDA (backend/losses.hpp): a kernel writes each row's gradient and
// per-block partial sums (per-pair values for the pairwise and DPO losses) in f64 into
// device scratch; the launcher copies them back and adds them on the host in block
// (pair) order, so the sums do not depend on timing. Each call synchronises its stream
// (the sums are host values).
#pragma once

#include "backend/losses.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// Doubles of device scratch the calls below need, for n rows or pairs.
std::int64_t loss_scratch(std::int64_t n);

PolicyLossSums policy_loss(cudaStream_t s, std::int64_t n, const PolicyLossRows<float>& in,
                           const PolicyLossOptions& opt, double scale, float* d_logprob, float* d_entropy,
                           double* scratch);
ValueLossSums value_loss(cudaStream_t s, std::int64_t n, const ValueLossRows<float>& in, double clip, double scale,
                         float* d_values, double* scratch);
PairwiseLossSums pairwise_loss(cudaStream_t s, std::int64_t pairs, const float* values,
                               const std::int64_t* chosen_rows, const std::int64_t* rejected_rows, double scale,
                               float* d_values, double* scratch);
double nll_loss(cudaStream_t s, std::int64_t n, const float* logprob, const float* weight, double scale,
                float* d_logprob, double* scratch);
DpoLossSums dpo_loss(cudaStream_t s, std::int64_t pairs, const DpoLossRows<float>& in, const DpoLossOptions& opt,
                     double scale, float* d_logprob, double* scratch);
WhiteningStats whiten(cudaStream_t s, std::int64_t n, float* x, const std::uint8_t* mask, double eps, double* scratch);

}  // namespace braid::backend::cuda
