#include "train/objective.hpp"

#include <algorithm>
#include <string_view>

namespace braid::train {

bool LossTotals::is_max(const std::string& metric) {
  return metric.size() >= 4 && std::string_view(metric).substr(metric.size() - 4) == "_max";
}

void LossTotals::add(const LossStats& s) {
  std::map<std::string, double> sums;
  for (const auto& [k, v] : s.metrics) sums[k] = is_max(k) ? v : v * s.units;
  merge(s.loss, s.units, sums);
}

void LossTotals::merge(double loss_sum, double units, const std::map<std::string, double>& metric_sums) {
  loss_ += loss_sum;
  units_ += units;
  for (const auto& [k, v] : metric_sums) {
    const auto it = metrics_.find(k);
    if (it == metrics_.end()) metrics_[k] = v;
    else if (is_max(k)) it->second = std::max(it->second, v);
    else it->second += v;
  }
}

LossStats LossTotals::mean() const {
  LossStats s;
  s.units = units_;
  if (units_ <= 0) return s;
  s.loss = loss_ / units_;
  for (const auto& [k, v] : metrics_) s.metrics[k] = is_max(k) ? v : v / units_;
  return s;
}

double total_units(const Objective& obj, std::span<const io::SampleBatch> micro_batches) {
  double total = 0;
  for (const io::SampleBatch& mb : micro_batches) total += obj.units(mb);
  return total;
}

}  // namespace braid::train
