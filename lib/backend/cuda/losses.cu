#include "backend/cuda/losses.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/loss_rows.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace braid::backend::cuda {
namespace {

constexpr int kBlocks = kReduceBlocks, kThreads = kReduceThreads;
constexpr int kPolicySums = 8;  // 7 sums, then ratio_max
constexpr int kValueSums = 4;
constexpr int kPairSums = 3;
constexpr int kDpoSums = 8;

#define BRAID_ROWS(i, n) \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); i += std::int64_t(gridDim.x) * blockDim.x)

__global__ void policy_kernel(std::int64_t n, PolicyLossRows<float> in, PolicyLossOptions opt, double scale,
                              float* d_logprob, float* d_entropy, double* partial) {
  const bool with_entropy = in.entropy != nullptr, entropy_grad = opt.entropy_coef != 0, with_ref = opt.kl_coef != 0;
  double sum[kPolicySums - 1] = {0, 0, 0, 0, 0, 0, 0};
  double ratio_max = 0;
  BRAID_ROWS(i, n) {
    const double w = in.weight[i];
    d_logprob[i] = 0;
    if (entropy_grad) d_entropy[i] = 0;
    if (w == 0) continue;
    const rows::PolicyRow row = rows::policy_row(in.logprob[i], rows::row_log_ratio(in, i), in.advantages[i],
                                                 with_entropy ? double(in.entropy[i]) : 0.0,
                                                 with_ref ? double(in.ref_logprob[i]) : 0.0, opt);
    if (with_entropy) {
      sum[5] += w * in.entropy[i];
      if (entropy_grad) d_entropy[i] = float(-scale * w * opt.entropy_coef);
    }
    if (with_ref) sum[6] += w * row.kl_ref;
    d_logprob[i] = float(scale * w * row.grad);
    sum[0] += w * row.loss;
    sum[1] += w * row.pg;
    sum[2] += w;
    sum[3] += w * (row.clipped ? 1.0 : 0.0);
    sum[4] += w * ((row.ratio - 1.0) - row.log_ratio);
    ratio_max = fmax(ratio_max, row.ratio);
  }
  for (int k = 0; k < kPolicySums - 1; ++k) {
    const double t = block_sum(sum[k]);
    if (threadIdx.x == 0) partial[blockIdx.x * kPolicySums + k] = t;
  }
  const double m = block_max(ratio_max, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x * kPolicySums + kPolicySums - 1] = m;
}

__global__ void value_kernel(std::int64_t n, ValueLossRows<float> in, double clip, double scale, float* d_values,
                             double* partial) {
  double sum[kValueSums] = {0, 0, 0, 0};
  BRAID_ROWS(i, n) {
    const double w = in.weight[i];
    d_values[i] = 0;
    if (w == 0) continue;
    const rows::ValueRow row = rows::value_row(in.values[i], in.returns[i], clip > 0 ? double(in.old_values[i]) : 0.0, clip);
    sum[0] += w * 0.5 * row.term;
    sum[1] += w;
    sum[2] += w * (row.clipped ? 1.0 : 0.0);
    sum[3] += w * row.error;
    d_values[i] = float(scale * w * row.grad);
  }
  for (int k = 0; k < kValueSums; ++k) {
    const double t = block_sum(sum[k]);
    if (threadIdx.x == 0) partial[blockIdx.x * kValueSums + k] = t;
  }
}

__global__ void nll_kernel(std::int64_t n, const float* logprob, const float* weight, double scale, float* d_logprob,
                           double* partial) {
  double loss = 0;
  BRAID_ROWS(i, n) {
    loss -= double(weight[i]) * double(logprob[i]);
    d_logprob[i] = float(-scale * double(weight[i]));
  }
  loss = block_sum(loss);
  if (threadIdx.x == 0) partial[blockIdx.x] = loss;
}

__global__ void pairwise_kernel(std::int64_t pairs, const float* values, const std::int64_t* chosen,
                                const std::int64_t* rejected, double scale, float* d_values, double* per_pair) {
  BRAID_ROWS(i, pairs) {
    const double margin = double(values[chosen[i]]) - double(values[rejected[i]]);
    const rows::PairRow row = rows::pair_row(margin);
    per_pair[i * kPairSums + 0] = row.loss;
    per_pair[i * kPairSums + 1] = margin > 0 ? 1.0 : 0.0;
    per_pair[i * kPairSums + 2] = margin;
    const double g = row.d_margin * scale;
    d_values[chosen[i]] = float(g);
    d_values[rejected[i]] = float(-g);
  }
}

__global__ void dpo_kernel(std::int64_t pairs, DpoLossRows<float> in, DpoLossOptions opt, double scale,
                           float* d_logprob, double* per_pair) {
  BRAID_ROWS(p, pairs) {
    const double beta = opt.beta;
    double logp[2], ref[2];
    rows::dpo_sequence_sums(in, p, logp, ref);
    const double z = (logp[0] - ref[0]) - (logp[1] - ref[1]);
    const rows::DpoRow term = rows::dpo_row(z, opt);
    const double loss = term.loss, d_z = term.d_z;
    double* out = per_pair + p * kDpoSums;
    out[0] = loss;
    out[1] = beta * z > 0 ? 1.0 : 0.0;
    out[2] = beta * z;
    out[3] = beta * (logp[0] - ref[0]);
    out[4] = beta * (logp[1] - ref[1]);
    out[5] = logp[0];
    out[6] = logp[1];
    out[7] = logp[0] > logp[1] ? 1.0 : 0.0;
    for (int side = 0; side < 2; ++side) {
      const std::int64_t s = 2 * p + side;
      const double g = scale * d_z * (side == 0 ? 1.0 : -1.0);
      for (std::int64_t row = in.sequence_rows[s]; row < in.sequence_rows[s + 1]; ++row)
        d_logprob[row] = float(g * double(in.weight[row]));
    }
  }
}

// pass 0: Σx and the count over masked rows; pass 1: Σ(x − mean)².
__global__ void whiten_sums_kernel(std::int64_t n, const float* x, const std::uint8_t* mask, double mean, int pass,
                                   double* partial) {
  double a = 0, c = 0;
  BRAID_ROWS(i, n) {
    if (!mask[i]) continue;
    const double d = pass == 0 ? double(x[i]) : (double(x[i]) - mean) * (double(x[i]) - mean);
    a += d;
    c += 1;
  }
  a = block_sum(a);
  c = block_sum(c);
  if (threadIdx.x == 0) {
    partial[blockIdx.x * 2] = a;
    partial[blockIdx.x * 2 + 1] = c;
  }
}

__global__ void whiten_apply_kernel(std::int64_t n, float* x, const std::uint8_t* mask, double mean, double denom) {
  BRAID_ROWS(i, n) {
    if (mask[i]) x[i] = float((double(x[i]) - mean) / denom);
  }
}

#undef BRAID_ROWS

// count·width doubles of device scratch to the host, after the stream's work so far.
std::vector<double> fetch(cudaStream_t s, const double* scratch, std::int64_t count, int width, const char* op) {
  std::vector<double> host(std::size_t(count * width));
  if (!host.empty()) check(cudaMemcpyAsync(host.data(), scratch, host.size() * sizeof(double), cudaMemcpyDeviceToHost, s), op);
  check(cudaStreamSynchronize(s), op);
  return host;
}

}  // namespace

std::int64_t loss_scratch(std::int64_t n) {
  return std::max<std::int64_t>(std::int64_t(kBlocks) * kPolicySums, n * kDpoSums);
}

PolicyLossSums policy_loss(cudaStream_t s, std::int64_t n, const PolicyLossRows<float>& in,
                           const PolicyLossOptions& opt, double scale, float* d_logprob, float* d_entropy,
                           double* scratch) {
  if (opt.entropy_coef != 0 && (!in.entropy || !d_entropy)) {
    throw std::invalid_argument("policy_loss: entropy_coef needs the entropy and its gradient");
  }
  if (opt.kl_coef != 0 && !in.ref_logprob) throw std::invalid_argument("policy_loss: kl_coef needs ref_logprob");
  PolicyLossSums r;
  if (n <= 0) return r;
  policy_kernel<<<kBlocks, kThreads, 0, s>>>(n, in, opt, scale, d_logprob, d_entropy, scratch);
  check_launch("policy_loss");
  const std::vector<double> p = fetch(s, scratch, kBlocks, kPolicySums, "policy_loss");
  for (int b = 0; b < kBlocks; ++b) {
    const double* x = p.data() + b * kPolicySums;
    r.loss += x[0], r.policy_loss += x[1], r.weight += x[2], r.clipped += x[3], r.approx_kl += x[4];
    r.entropy += x[5], r.kl_ref += x[6], r.ratio_max = std::max(r.ratio_max, x[7]);
  }
  return r;
}

ValueLossSums value_loss(cudaStream_t s, std::int64_t n, const ValueLossRows<float>& in, double clip, double scale,
                         float* d_values, double* scratch) {
  ValueLossSums r;
  if (n <= 0) return r;
  value_kernel<<<kBlocks, kThreads, 0, s>>>(n, in, clip, scale, d_values, scratch);
  check_launch("value_loss");
  const std::vector<double> p = fetch(s, scratch, kBlocks, kValueSums, "value_loss");
  for (int b = 0; b < kBlocks; ++b) {
    const double* x = p.data() + b * kValueSums;
    r.loss += x[0], r.weight += x[1], r.clipped += x[2], r.error += x[3];
  }
  return r;
}

PairwiseLossSums pairwise_loss(cudaStream_t s, std::int64_t pairs, const float* values,
                               const std::int64_t* chosen_rows, const std::int64_t* rejected_rows, double scale,
                               float* d_values, double* scratch) {
  PairwiseLossSums r;
  if (pairs <= 0) return r;
  pairwise_kernel<<<blocks_for(pairs, kThreads), kThreads, 0, s>>>(pairs, values, chosen_rows, rejected_rows, scale,
                                                                  d_values, scratch);
  check_launch("pairwise_loss");
  const std::vector<double> p = fetch(s, scratch, pairs, kPairSums, "pairwise_loss");
  for (std::int64_t i = 0; i < pairs; ++i) {
    r.loss += p[std::size_t(i * kPairSums)], r.correct += p[std::size_t(i * kPairSums + 1)];
    r.margin += p[std::size_t(i * kPairSums + 2)];
  }
  return r;
}

double nll_loss(cudaStream_t s, std::int64_t n, const float* logprob, const float* weight, double scale,
                float* d_logprob, double* scratch) {
  if (n <= 0) return 0;
  nll_kernel<<<kBlocks, kThreads, 0, s>>>(n, logprob, weight, scale, d_logprob, scratch);
  check_launch("nll_loss");
  double loss = 0;
  for (double x : fetch(s, scratch, kBlocks, 1, "nll_loss")) loss += x;
  return loss;
}

DpoLossSums dpo_loss(cudaStream_t s, std::int64_t pairs, const DpoLossRows<float>& in, const DpoLossOptions& opt,
                     double scale, float* d_logprob, double* scratch) {
  if (!(opt.beta > 0)) throw std::invalid_argument("dpo_loss: beta must be > 0");
  DpoLossSums r;
  if (pairs <= 0) return r;
  dpo_kernel<<<blocks_for(pairs, 64), 64, 0, s>>>(pairs, in, opt, scale, d_logprob, scratch);
  check_launch("dpo_loss");
  const std::vector<double> p = fetch(s, scratch, pairs, kDpoSums, "dpo_loss");
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double* x = p.data() + i * kDpoSums;
    r.loss += x[0], r.correct += x[1], r.margin += x[2], r.reward_chosen += x[3], r.reward_rejected += x[4];
    r.logp_chosen += x[5], r.logp_rejected += x[6], r.logp_correct += x[7];
  }
  return r;
}

WhiteningStats whiten(cudaStream_t s, std::int64_t n, float* x, const std::uint8_t* mask, double eps,
                      double* scratch) {
  WhiteningStats w;
  if (n <= 0) return w;
  auto sums = [&](double mean, int pass) {
    whiten_sums_kernel<<<kBlocks, kThreads, 0, s>>>(n, x, mask, mean, pass, scratch);
    check_launch("whiten");
    const std::vector<double> p = fetch(s, scratch, kBlocks, 2, "whiten");
    double a = 0, c = 0;
    for (int b = 0; b < kBlocks; ++b) a += p[std::size_t(2 * b)], c += p[std::size_t(2 * b + 1)];
    return std::pair{a, c};
  };
  const auto [sum, count] = sums(0.0, 0);
  w.count = std::int64_t(count);
  if (w.count == 0) return w;
  w.mean = sum / count;
  w.std = std::sqrt(sums(w.mean, 1).first / count);
  whiten_apply_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, x, mask, w.mean, w.std + eps);
  check_launch("whiten");
  return w;
}

}  // namespace braid::backend::cuda
