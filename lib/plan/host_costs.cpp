#include "plan/host_costs.hpp"

namespace braid::plan {

double HostCosts::start(int ranks, bool mpirun) const {
  if (!mpirun) return process_start;
  return mpi_start.v.empty() ? process_start : mpi_start.at(ranks);
}

double HostCosts::touch(double bytes) const { return touch_bandwidth > 0 ? bytes / touch_bandwidth : 0; }

double HostCosts::write(double bytes, double files, double datasets) const {
  return files * (file_latency + datasets * dataset_latency) + (write_bandwidth > 0 ? bytes / write_bandwidth : 0);
}

double HostCosts::read(double bytes, double files, double datasets) const {
  return files * (file_latency + datasets * dataset_latency) + (read_bandwidth > 0 ? bytes / read_bandwidth : 0);
}

ordered_json host_to_json(const HostCosts& h) {
  ordered_json mpi = {{"ranks", h.mpi_start.x}, {"values", ordered_json::array()}};
  for (double v : h.mpi_start.v) mpi["values"].push_back(v * 1e3);
  return {{"cores", h.cores},
          {"process_start_ms", h.process_start * 1e3},
          {"mpi_start_ms", mpi},
          {"touch_gbs", h.touch_bandwidth / 1e9},
          {"file_ms", h.file_latency * 1e3},
          {"dataset_ms", h.dataset_latency * 1e3},
          {"write_gbs", h.write_bandwidth / 1e9},
          {"read_gbs", h.read_bandwidth / 1e9}};
}

HostCosts host_from_json(const json& j, Checker& c, const std::string& where) {
  HostCosts h;
  c.no_unknown_keys(j, where, {"cores", "process_start_ms", "mpi_start_ms", "touch_gbs", "file_ms", "dataset_ms",
                               "write_gbs", "read_gbs"});
  const Bounds nonneg{.min = 0};
  const Bounds positive{.min = 0, .exclusive_min = true};
  h.cores = static_cast<int>(c.integer(j, where, "cores", {.min = 1, .max = 1 << 16}).value_or(0));
  h.process_start = c.number(j, where, "process_start_ms", nonneg).value_or(0) / 1e3;
  const json& mpi = c.object(j, where, "mpi_start_ms");
  const std::string mw = Checker::path(where, "mpi_start_ms");
  c.no_unknown_keys(mpi, mw, {"ranks", "values"});
  for (const auto& [w, x] : c.array_items(mpi, mw, "ranks")) {
    if (x->is_number() && x->get<double>() >= 1) h.mpi_start.x.push_back(x->get<double>());
    else c.fail(w, "not a rank count");
  }
  for (const auto& [w, v] : c.array_items(mpi, mw, "values")) {
    if (v->is_number() && v->get<double>() >= 0) h.mpi_start.v.push_back(v->get<double>() / 1e3);
    else c.fail(w, "not a time in ms");
  }
  if (h.mpi_start.x.size() != h.mpi_start.v.size()) c.fail(mw, "ranks and values differ in length");
  for (std::size_t i = 1; i < h.mpi_start.x.size(); ++i) {
    if (h.mpi_start.x[i] <= h.mpi_start.x[i - 1]) c.fail(Checker::path(mw, "ranks"), "not increasing");
  }
  h.touch_bandwidth = c.number(j, where, "touch_gbs", positive).value_or(1) * 1e9;
  h.file_latency = c.number(j, where, "file_ms", nonneg).value_or(0) / 1e3;
  h.dataset_latency = c.number(j, where, "dataset_ms", nonneg).value_or(0) / 1e3;
  h.write_bandwidth = c.number(j, where, "write_gbs", positive).value_or(1) * 1e9;
  h.read_bandwidth = c.number(j, where, "read_gbs", positive).value_or(1) * 1e9;
  return h;
}

}  // namespace braid::plan
