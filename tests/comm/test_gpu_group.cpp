// comm::cuda_group on real device memory (cudaMalloc): the transport chosen from where the
// ranks run (NCCL when each has a GPU of its own, MPI staged through host memory when
// they share one), and every call of the group on device buffers against values each
// rank can compute: all-reduce (blocking, in flight, bucketed), all-gather (equal and
// varying parts), broadcast, point to point with device and host ends, a sub-group.
// Rank r runs on GPU r mod (GPUs). Without a GPU it exits 77 (ctest: skipped). Alone, and
// under mpirun with 2 ranks: on a machine with one GPU both share it (the MPI fallback).
#define BOOST_TEST_MODULE gpu_group
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "comm/device_group.hpp"
#include "comm/mpi.hpp"
#include "comm/nccl.hpp"
#include "device_vector.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <vector>

using namespace braid;

namespace {

comm::Communicator* g_world = nullptr;
std::unique_ptr<comm::Communicator> g_group;
comm::TransportChoice g_choice;
int g_devices = 0;

BOOST_AUTO_TEST_CASE(the_transport_follows_the_placement) {
  const int n = g_world->size();
  BOOST_TEST(g_group->takes_device_memory());
  const bool own = g_devices >= n;
  const bool want_nccl = own && comm::nccl_built();
  BOOST_TEST((g_choice.transport == (want_nccl ? comm::DeviceTransport::nccl : comm::DeviceTransport::mpi_staged)),
             g_choice.describe());
  // Ranks that share a GPU say so, unless the build has no NCCL or the environment chose.
  if (!own && comm::nccl_built() && std::getenv("BRAID_DEVICE_COMM") == nullptr)
    BOOST_TEST(g_choice.reason.find("share the GPU") != std::string::npos, g_choice.describe());
  BOOST_TEST_MESSAGE("device buffers between " << n << " rank(s): " << g_choice.describe());
}

BOOST_AUTO_TEST_CASE(reductions_on_device_buffers) {
  comm::Communicator& g = *g_group;
  const int r = g.rank(), n = g.size();
  std::vector<float> x(100000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(r + 1) * float(i % 7);
  DeviceVector<float> dx(x);
  g.all_reduce(dx.span(), comm::ReduceOp::sum);
  const auto got = dx.host();
  for (std::size_t i = 0; i < got.size(); i += 37) BOOST_TEST(got[i] == float(n * (n + 1) / 2) * float(i % 7));

  DeviceVector<double> dmax(std::vector<double>{double(r), -double(r)});
  comm::Request pending = g.iall_reduce_elements(dmax.ptr, 2, comm::DataType::f64, comm::ReduceOp::max);
  pending.wait();
  BOOST_TEST(dmax.host() == (std::vector<double>{double(n - 1), 0.0}));
  std::int64_t host_min = r + 5;   // host memory through the same group
  g.all_reduce(std::span<std::int64_t>(&host_min, 1), comm::ReduceOp::min);
  BOOST_TEST(host_min == 5);

  std::vector<float> grads(300001);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = float(r) + float(i % 13);
  DeviceVector<float> dg(grads);
  comm::all_reduce_bucketed(g, dg.span(), 65536, 3);
  const auto summed = dg.host();
  for (std::size_t i = 0; i < summed.size(); i += 101)
    BOOST_TEST(summed[i] == float(n * (n - 1) / 2) + float(n) * float(i % 13));
}

BOOST_AUTO_TEST_CASE(gathers_broadcast_and_point_to_point) {
  comm::Communicator& g = *g_group;
  const int r = g.rank(), n = g.size();
  DeviceVector<float> b(std::vector<float>(16, float(r)));
  g.broadcast(b.span(), n - 1);
  BOOST_TEST(b.host() == std::vector<float>(16, float(n - 1)));

  DeviceVector<float> mine(std::vector<float>(4, float(10 * r)));
  DeviceVector<float> all(std::vector<float>(std::size_t(4 * n), -1.0f));
  g.all_gather_bytes(mine.ptr, 4 * sizeof(float), all.ptr);
  std::vector<float> want;
  for (int k = 0; k < n; ++k) want.insert(want.end(), 4, float(10 * k));
  BOOST_TEST(all.host() == want);

  std::vector<std::size_t> counts;
  for (int k = 0; k < n; ++k) counts.push_back(std::size_t(k + 1));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t(0));
  std::vector<float> parts(total, -1.0f);
  for (int j = 0; j <= r; ++j) parts[std::size_t(r * (r + 1) / 2 + j)] = float(r);
  DeviceVector<float> dparts(parts);
  g.all_gather_varying(dparts.span(), counts);
  std::vector<float> whole;
  for (int k = 0; k < n; ++k) whole.insert(whole.end(), std::size_t(k + 1), float(k));
  BOOST_TEST(dparts.host() == whole);

  if (n > 1) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    DeviceVector<float> out(std::vector<float>(8, float(r))), in(std::vector<float>(8, -1.0f));
    comm::Request q = g.irecv(in.span(), prev, 3);
    g.send(std::span<const float>(out.ptr, 8), next, 3);
    q.wait();
    BOOST_TEST(in.host() == std::vector<float>(8, float(prev)));
    std::vector<float> host_in(8, -1.0f);   // a device end and a host end
    comm::Request q2 = g.irecv(std::span<float>(host_in), prev, 4);
    g.send(std::span<const float>(out.ptr, 8), next, 4);
    q2.wait();
    BOOST_TEST(host_in == std::vector<float>(8, float(prev)));
  }
  auto sub = g.split(r % 2, r);
  BOOST_REQUIRE(sub);
  BOOST_TEST(sub->takes_device_memory());
  DeviceVector<std::int64_t> one(std::vector<std::int64_t>{1});
  sub->all_reduce(one.span(), comm::ReduceOp::sum);
  BOOST_TEST(one.host()[0] == std::int64_t((n - r % 2 + 1) / 2));
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  auto world = comm::mpi_world();
  if (cudaGetDeviceCount(&g_devices) != cudaSuccess || g_devices < 1) {
    if (world->rank() == 0) std::cout << "skipped: no GPU\n";
    return 77;
  }
  const int device = world->rank() % g_devices;
  if (cudaSetDevice(device) != cudaSuccess) return 77;
  g_world = world.get();
  g_group = comm::device_group(*world, comm::cuda_memory(device), comm::transport_request_from_env(), &g_choice);
  const int rc = boost::unit_test::unit_test_main(&::init_unit_test, argc, argv);
  g_group.reset();
  return rc;
}
