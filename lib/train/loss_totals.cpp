#include "train/objective.hpp"

#include "core/json.hpp"

#include <algorithm>
#include <string_view>

namespace braid::train {

bool LossTotals::is_max(const std::string& metric) {
  return metric.size() >= 4 && std::string_view(metric).substr(metric.size() - 4) == "_max";
}

void LossTotals::add(const LossStats& s) {
  const double metric_units = s.metric_units < 0 ? s.units : s.metric_units;
  std::map<std::string, double> sums;
  for (const auto& [k, v] : s.metrics) sums[k] = is_max(k) ? v : v * metric_units;
  merge(s.loss, s.units, metric_units, sums);
}

void LossTotals::merge(double loss_sum, double units, double metric_units,
                       const std::map<std::string, double>& metric_sums) {
  loss_ += loss_sum;
  units_ += units;
  metric_units_ += metric_units;
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
  s.metric_units = metric_units_;
  if (units_ <= 0) return s;
  s.loss = loss_ / units_;
  for (const auto& [k, v] : metrics_) s.metrics[k] = is_max(k) ? v : (metric_units_ > 0 ? v / metric_units_ : 0.0);
  return s;
}

LossTotals LossTotals::over_ranks(comm::Communicator& comm, const LossTotals& mine) {
  // A handful of numbers per rank: each rank's sums broadcast from it as JSON (doubles
  // round-trip exactly), merged in rank order so that every rank gets the same sums.
  LossTotals all;
  for (int r = 0; r < comm.size(); ++r) {
    std::string text;
    if (r == comm.rank()) {
      json j = {{"loss", mine.loss_}, {"units", mine.units_}, {"metric_units", mine.metric_units_},
                {"metrics", mine.metrics_}};
      text = j.dump();
    }
    comm.broadcast(text, r);
    const json j = json::parse(text);
    all.merge(j.at("loss").get<double>(), j.at("units").get<double>(), j.at("metric_units").get<double>(),
              j.at("metrics").get<std::map<std::string, double>>());
  }
  return all;
}

double total_units(const Objective& obj, std::span<const io::SampleBatch> micro_batches) {
  double total = 0;
  for (const io::SampleBatch& mb : micro_batches) total += obj.units(mb);
  return total;
}

}  // namespace braid::train
