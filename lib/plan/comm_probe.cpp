#include "plan/comm_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "comm/mpi.hpp"
#include "core/clock.hpp"

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

CommMeasurement measure_comm(comm::Communicator& world, double max_bytes, int repeats) {
  using Clock = std::chrono::steady_clock;
  CommMeasurement m;
  const int rank = world.rank();
  m.ranks = world.size();
  const std::string host = comm::processor_name();
  std::string host0 = host;
  world.broadcast(host0, 0);
  std::int64_t same = host == host0 ? 1 : 0;
  world.all_reduce(std::span<std::int64_t>(&same, 1), comm::ReduceOp::min);
  m.same_host = same != 0;
  if (m.ranks < 2) return m;

  const auto max_floats = static_cast<std::size_t>(max_bytes / 4);
  std::vector<float> buf(max_floats, 1.0f), out(max_floats, 0.0f);
  for (std::size_t n = 2; n <= max_floats; n *= 4) {
    const double bytes = static_cast<double>(n) * 4;
    const std::span<float> sent(buf.data(), n), got(out.data(), n);
    // Ping-pong between ranks 0 and 1; the others wait at the barrier.
    std::vector<double> t;
    for (int r = 0; r <= repeats; ++r) {
      world.barrier();
      const auto t0 = Clock::now();
      if (rank == 0) {
        world.send(std::span<const float>(sent), 1, 0);
        world.recv(got, 1, 0);
      } else if (rank == 1) {
        world.recv(got, 0, 0);
        world.send(std::span<const float>(got), 0, 0);
      }
      double dt = seconds_since(t0) / 2;
      world.broadcast(std::span<double>(&dt, 1), 0);
      if (r > 0) t.push_back(dt);  // the first run is a warm-up
    }
    m.p2p.push_back(median_point(bytes, t));

    t.clear();
    for (int r = 0; r <= repeats; ++r) {
      std::fill(got.begin(), got.end(), static_cast<float>(rank + 1));
      world.barrier();
      const auto t0 = Clock::now();
      world.all_reduce_sum(got);
      double dt = seconds_since(t0);
      world.all_reduce(std::span<double>(&dt, 1), comm::ReduceOp::max);
      const float expect = static_cast<float>(m.ranks) * static_cast<float>(m.ranks + 1) / 2;
      if (got[0] != expect || got[n - 1] != expect) {
        throw std::runtime_error(fmt::format("all-reduce probe: got {} where the sum is {}", got[0], expect));
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
