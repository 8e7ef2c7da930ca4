// comm::device_group without a GPU: the choice of transport from every rank's placement,
// BRAID_DEVICE_COMM, and the staging path over MPI with a fake device whose memory the
// host cannot read as it is (every byte is stored XOR-ed): a buffer handed to MPI
// without staging would reduce, gather or arrive scrambled. Alone and under mpirun with
// 2, 3 and 4 ranks.
#define BOOST_TEST_MODULE device_group
#include <boost/test/unit_test.hpp>

#include "comm/device_group.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"
#include "core/error.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "tests/common/mpi_fixture.hpp"

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

constexpr unsigned char kScramble = 0x5a;

// Device memory the host cannot take as it is: allocations of its own, bytes stored XOR-ed.
class FakeDevice final : public comm::DeviceMemory {
 public:
  explicit FakeDevice(std::string gpu) : gpu_(std::move(gpu)) {}
  template <typename T> T* allocate(std::size_t n) {
    blocks_.emplace_back(n * sizeof(T) + 1);
    return reinterpret_cast<T*>(blocks_.back().data());
  }
  template <typename T> void put(T* device, const std::vector<T>& host) { to_device(device, host.data(), host.size() * sizeof(T)); }
  template <typename T> std::vector<T> get(const T* device, std::size_t n) {
    std::vector<T> host(n);
    to_host(host.data(), device, n * sizeof(T));
    return host;
  }

  bool holds(const void* p) const override {
    for (const auto& b : blocks_) {
      if (p >= b.data() && p < b.data() + b.size()) return true;
    }
    return false;
  }
  void to_host(void* host, const void* device, std::size_t bytes) override {
    BOOST_REQUIRE(holds(device) && !holds(host));
    for (std::size_t i = 0; i < bytes; ++i)
      static_cast<unsigned char*>(host)[i] = static_cast<const unsigned char*>(device)[i] ^ kScramble;
    ++copies;
  }
  void to_device(void* device, const void* host, std::size_t bytes) override {
    BOOST_REQUIRE(holds(device) && !holds(host));
    for (std::size_t i = 0; i < bytes; ++i)
      static_cast<unsigned char*>(device)[i] = static_cast<const unsigned char*>(host)[i] ^ kScramble;
    ++copies;
  }
  void settle() override {}
  void* stream() override { return nullptr; }
  std::string gpu() const override { return gpu_; }

  int copies = 0;

 private:
  std::string gpu_;
  std::vector<std::vector<unsigned char>> blocks_;
};

struct Staged {
  std::unique_ptr<comm::Communicator> world = comm::mpi_world();
  std::shared_ptr<FakeDevice> dev = std::make_shared<FakeDevice>("fake-gpu");
  comm::TransportChoice choice;
  std::unique_ptr<comm::Communicator> group =
      comm::device_group(*world, dev, comm::TransportRequest::mpi, &choice);
  int r = world->rank(), n = world->size();
};

}  // namespace

BOOST_AUTO_TEST_CASE(transport_from_placements) {
  using comm::DeviceTransport;
  using comm::TransportRequest;
  const std::vector<std::string> own{"h1 0000:01:00.0", "h1 0000:02:00.0", "h2 0000:01:00.0"};
  const std::vector<std::string> shared{"h1 0000:01:00.0", "h2 0000:01:00.0", "h1 0000:01:00.0"};
  BOOST_TEST((comm::choose_transport(TransportRequest::automatic, true, own).transport == DeviceTransport::nccl));
  BOOST_TEST(comm::choose_transport(TransportRequest::automatic, true, own).reason == "each of the 3 ranks has its own GPU");
  const auto fallback = comm::choose_transport(TransportRequest::automatic, true, shared);
  BOOST_TEST((fallback.transport == DeviceTransport::mpi_staged));
  BOOST_TEST(fallback.reason == "ranks 0 and 2 share the GPU h1 0000:01:00.0");
  BOOST_TEST(fallback.describe() == "MPI, staged through host memory (ranks 0 and 2 share the GPU h1 0000:01:00.0)");
  BOOST_TEST((comm::choose_transport(TransportRequest::mpi, true, own).transport == DeviceTransport::mpi_staged));
  BOOST_TEST(comm::choose_transport(TransportRequest::mpi, true, own).reason == "BRAID_DEVICE_COMM=mpi");
  BOOST_TEST((comm::choose_transport(TransportRequest::nccl, true, own).transport == DeviceTransport::nccl));
  BOOST_TEST((comm::choose_transport(TransportRequest::automatic, false, own).transport == DeviceTransport::mpi_staged));
  BOOST_TEST(comm::choose_transport(TransportRequest::automatic, false, own).reason == "this build has no NCCL");
  // Asked for and impossible: the user's error, said before any work.
  BOOST_CHECK_THROW(comm::choose_transport(TransportRequest::nccl, true, shared), UsageError);
  BOOST_CHECK_THROW(comm::choose_transport(TransportRequest::nccl, false, own), UsageError);
  // One rank alone has nobody to share with.
  BOOST_TEST((comm::choose_transport(TransportRequest::automatic, true, std::vector<std::string>{"h 0"}).transport ==
              DeviceTransport::nccl));
}

BOOST_AUTO_TEST_CASE(the_variable) {
  BOOST_TEST((comm::parse_transport_request("auto") == comm::TransportRequest::automatic));
  BOOST_TEST((comm::parse_transport_request("nccl") == comm::TransportRequest::nccl));
  BOOST_TEST((comm::parse_transport_request("mpi") == comm::TransportRequest::mpi));
  BOOST_CHECK_THROW(comm::parse_transport_request("NCCL"), UsageError);
  BOOST_CHECK_THROW(comm::parse_transport_request("gloo"), UsageError);
  ::setenv("BRAID_DEVICE_COMM", "mpi", 1);
  BOOST_TEST((comm::transport_request_from_env() == comm::TransportRequest::mpi));
  ::setenv("BRAID_DEVICE_COMM", "", 1);
  BOOST_TEST((comm::transport_request_from_env() == comm::TransportRequest::automatic));
  ::setenv("BRAID_DEVICE_COMM", "sometimes", 1);
  BOOST_CHECK_THROW(comm::transport_request_from_env(), UsageError);
  ::unsetenv("BRAID_DEVICE_COMM");
  BOOST_TEST((comm::transport_request_from_env() == comm::TransportRequest::automatic));
}

BOOST_AUTO_TEST_CASE(every_rank_on_one_gpu_falls_back_to_mpi) {
  auto world = comm::mpi_world();
  comm::TransportChoice choice;
  auto group = comm::device_group(*world, std::make_shared<FakeDevice>("fake-gpu"), comm::TransportRequest::automatic,
                                  &choice);
  BOOST_TEST(group->takes_device_memory());
  BOOST_TEST(!world->takes_device_memory());
  BOOST_TEST(group->size() == world->size());
  if (world->size() > 1) {
    BOOST_TEST((choice.transport == comm::DeviceTransport::mpi_staged));
    BOOST_TEST(choice.reason.find("ranks 0 and 1 share the GPU") == 0u);
  }
  if (world->size() > 1) {
    BOOST_CHECK_THROW(comm::device_group(*world, std::make_shared<FakeDevice>("fake-gpu"), comm::TransportRequest::nccl),
                      UsageError);
  }
}

BOOST_AUTO_TEST_CASE(reductions_stage_device_buffers) {
  Staged s;
  BOOST_TEST((s.choice.transport == comm::DeviceTransport::mpi_staged));
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(s.r + 1) * float(i % 7) + 0.25f;
  float* dx = s.dev->allocate<float>(x.size());
  s.dev->put(dx, x);
  s.group->all_reduce(std::span<float>(dx, x.size()), comm::ReduceOp::sum);
  const auto sum = s.dev->get(dx, x.size());
  for (std::size_t i = 0; i < x.size(); i += 97)
    BOOST_TEST(sum[i] == float(s.n * (s.n + 1) / 2) * float(i % 7) + 0.25f * float(s.n));

  double* dmax = s.dev->allocate<double>(2);
  s.dev->put(dmax, std::vector<double>{double(s.r), -double(s.r)});
  comm::Request pending = s.group->iall_reduce_elements(dmax, 2, comm::DataType::f64, comm::ReduceOp::max);
  pending.wait();
  BOOST_TEST(s.dev->get(dmax, 2) == (std::vector<double>{double(s.n - 1), 0.0}));

  // Host memory goes to MPI as it is, not through the device's copies.
  const int before = s.dev->copies;
  std::int64_t v = s.r + 5;
  s.group->all_reduce(std::span<std::int64_t>(&v, 1), comm::ReduceOp::min);
  BOOST_TEST(v == 5);
  BOOST_TEST(s.dev->copies == before);

  // Gradients: the bucketed, in-flight reduction of a long device buffer.
  std::vector<float> g(10007);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = float(s.r) + float(i % 13);
  float* dg = s.dev->allocate<float>(g.size());
  s.dev->put(dg, g);
  comm::all_reduce_bucketed(*s.group, std::span<float>(dg, g.size()), 1000, 3);
  const auto got = s.dev->get(dg, g.size());
  for (std::size_t i = 0; i < g.size(); i += 101)
    BOOST_TEST(got[i] == float(s.n * (s.n - 1) / 2) + float(s.n) * float(i % 13));
}

BOOST_AUTO_TEST_CASE(gathers_and_broadcast_stage_device_buffers) {
  Staged s;
  float* b = s.dev->allocate<float>(16);
  s.dev->put(b, std::vector<float>(16, float(s.r)));
  s.group->broadcast(std::span<float>(b, 16), s.n - 1);
  BOOST_TEST(s.dev->get(b, 16) == std::vector<float>(16, float(s.n - 1)));

  // Device to device, and a host part into a device whole.
  float* mine = s.dev->allocate<float>(4);
  float* all = s.dev->allocate<float>(std::size_t(4 * s.n));
  s.dev->put(mine, std::vector<float>(4, float(10 * s.r)));
  s.group->all_gather_bytes(mine, 4 * sizeof(float), all);
  std::vector<float> want;
  for (int k = 0; k < s.n; ++k) want.insert(want.end(), 4, float(10 * k));
  BOOST_TEST(s.dev->get(all, std::size_t(4 * s.n)) == want);
  const std::vector<float> host_mine(4, float(10 * s.r));
  float* all2 = s.dev->allocate<float>(std::size_t(4 * s.n));
  s.group->all_gather_bytes(host_mine.data(), 4 * sizeof(float), all2);
  BOOST_TEST(s.dev->get(all2, std::size_t(4 * s.n)) == want);

  // ZeRO-1's all-gather of the updated weights: rank k's part of k + 1 elements, in place.
  std::vector<std::size_t> counts;
  for (int k = 0; k < s.n; ++k) counts.push_back(std::size_t(k + 1));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t(0));
  std::vector<float> parts(total, -1.0f);
  const std::size_t offset = std::size_t(s.r * (s.r + 1) / 2);
  for (int j = 0; j <= s.r; ++j) parts[offset + std::size_t(j)] = float(s.r);
  float* dparts = s.dev->allocate<float>(total);
  s.dev->put(dparts, parts);
  s.group->all_gather_varying(std::span<float>(dparts, total), counts);
  std::vector<float> whole;
  for (int k = 0; k < s.n; ++k) whole.insert(whole.end(), std::size_t(k + 1), float(k));
  BOOST_TEST(s.dev->get(dparts, total) == whole);
}

BOOST_AUTO_TEST_CASE(point_to_point_stages_either_end) {
  Staged s;
  if (s.n == 1) return;
  const int next = (s.r + 1) % s.n, prev = (s.r + s.n - 1) % s.n;
  float* out = s.dev->allocate<float>(8);
  float* in = s.dev->allocate<float>(8);
  s.dev->put(out, std::vector<float>(8, float(s.r)));
  comm::Request q = s.group->irecv(std::span<float>(in, 8), prev, 3);
  comm::Request p = s.group->isend(std::span<const float>(out, 8), next, 3);
  p.wait();
  while (!q.test()) {
  }
  BOOST_TEST(s.dev->get(in, 8) == std::vector<float>(8, float(prev)));
  // A device buffer sent, a host buffer received (the checkpoint writer's side), and back.
  std::vector<float> host_in(8, -1.0f);
  comm::Request q2 = s.group->irecv(std::span<float>(host_in), prev, 4);
  s.group->send(std::span<const float>(out, 8), next, 4);
  q2.wait();
  BOOST_TEST(host_in == std::vector<float>(8, float(prev)));
  const std::vector<float> host_out(8, float(100 + s.r));
  comm::Request q3 = s.group->irecv(std::span<float>(in, 8), prev, 5);
  s.group->send(std::span<const float>(host_out), next, 5);
  q3.wait();
  BOOST_TEST(s.dev->get(in, 8) == std::vector<float>(8, float(100 + prev)));
}

BOOST_AUTO_TEST_CASE(groups_of_a_mesh_take_device_buffers) {
  Staged s;
  const int tp = s.n % 2 == 0 ? 2 : 1;
  comm::Mesh mesh(*s.group, tp);
  comm::Communicator* g = tp > 1 ? mesh.tp_group() : mesh.cross_group();
  if (!g) return;   // one rank: no group of more than one
  BOOST_TEST(g->takes_device_memory());
  float* d = s.dev->allocate<float>(3);
  s.dev->put(d, std::vector<float>{1.0f, float(s.r), 2.0f});
  g->all_reduce(std::span<float>(d, 3), comm::ReduceOp::sum);
  const auto got = s.dev->get(d, 3);
  BOOST_TEST(got[0] == float(g->size()));
  BOOST_TEST(got[2] == 2.0f * float(g->size()));
}
