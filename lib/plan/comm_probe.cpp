#include "plan/comm_probe.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace braid::plan {
namespace {

CommPoint median_point(double bytes, std::vector<double> t) {
  std::sort(t.begin(), t.end());
  CommPoint p;
  p.bytes = bytes;
  p.seconds = t[t.size() / 2];
  p.spread = p.seconds > 0 ? (t.back() - t.front()) / p.seconds : 0;
  return p;
}

}  // namespace

CommMeasurement measure_comm(double max_bytes, int repeats) {
  CommMeasurement m;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m.ranks);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  char host0[MPI_MAX_PROCESSOR_NAME] = {};
  std::memcpy(host0, host, sizeof(host));
  MPI_Bcast(host0, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = std::strcmp(host, host0) == 0, all_same = 0;
  MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  m.same_host = all_same != 0;
  if (m.ranks < 2) return m;

  const auto max_floats = static_cast<std::size_t>(max_bytes / 4);
  std::vector<float> buf(max_floats, 1.0f), out(max_floats, 0.0f);
  for (std::size_t n = 2; n <= max_floats; n *= 4) {
    const double bytes = static_cast<double>(n) * 4;
    const int count = static_cast<int>(n);
    // Ping-pong between ranks 0 and 1; the others wait at the barrier.
    std::vector<double> t;
    for (int r = 0; r <= repeats; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf.data(), count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(out.data(), count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(out.data(), count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(out.data(), count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
      }
      double dt = (MPI_Wtime() - t0) / 2;
      MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (r > 0) t.push_back(dt);  // the first run is a warm-up
    }
    m.p2p.push_back(median_point(bytes, t));

    t.clear();
    for (int r = 0; r <= repeats; ++r) {
      std::fill(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n), static_cast<float>(rank + 1));
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(buf.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const float expect = static_cast<float>(m.ranks) * static_cast<float>(m.ranks + 1) / 2;
      if (out[0] != expect || out[n - 1] != expect) {
        throw std::runtime_error(fmt::format("all-reduce probe: got {} where the sum is {}", out[0], expect));
      }
      if (r > 0) t.push_back(dt);
    }
    m.allreduce.push_back(median_point(bytes, t));
  }
  // Latency: the fastest of the three smallest messages (the very first may pay for connection setup).
  // Bandwidth: the best rate among messages of 64 kB and more; on a shared machine the largest
  // messages are the ones other processes disturb most.
  auto fit = [](const std::vector<CommPoint>& pts, double factor) {
    LinkCosts l{0, pts.front().seconds};
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (i < 3) l.latency = std::min(l.latency, pts[i].seconds);
      if (pts[i].bytes >= 65536) l.bandwidth = std::max(l.bandwidth, factor * pts[i].bytes / pts[i].seconds);
    }
    if (l.bandwidth == 0) l.bandwidth = factor * pts.back().bytes / pts.back().seconds;
    return l;
  };
  m.p2p_link = fit(m.p2p, 1.0);
  // Bus bandwidth, as the cost model uses it: 2(n-1)/n x bytes / time; latency per tree step.
  m.allreduce_link = fit(m.allreduce, 2.0 * (m.ranks - 1) / m.ranks);
  m.allreduce_link.latency /= 2 * std::ceil(std::log2(m.ranks));
  return m;
}

ordered_json comm_to_json(const CommMeasurement& m) {
  auto points = [](const std::vector<CommPoint>& v) {
    ordered_json a = ordered_json::array();
    for (const auto& p : v) a.push_back({{"bytes", p.bytes}, {"seconds", p.seconds}, {"spread", p.spread}});
    return a;
  };
  ordered_json j;
  j["format"] = "braid.comm";
  j["version"] = 1;
  j["ranks"] = m.ranks;
  j["same_host"] = m.same_host;
  j["p2p"] = {{"gbs", m.p2p_link.bandwidth / 1e9}, {"latency_us", m.p2p_link.latency * 1e6}, {"points", points(m.p2p)}};
  j["allreduce"] = {{"gbs", m.allreduce_link.bandwidth / 1e9},
                    {"latency_us", m.allreduce_link.latency * 1e6},
                    {"points", points(m.allreduce)}};
  return j;
}

}  // namespace braid::plan
