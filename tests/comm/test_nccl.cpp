// The NCCL communicator on device buffers: all-reduce (sum, max, min; blocking and in
// flight), broadcast, all-gather (equal and varying parts), point to point around a ring
// and a split, against values every rank can compute. Built where CUDA and NCCL are
// found; without a GPU per rank it exits 77 (ctest: skipped). Alone, and under mpirun
// with 2 ranks (skipped on a machine with one GPU: NCCL takes one GPU per rank).
#define BOOST_TEST_MODULE nccl
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "comm/mpi.hpp"
#include "comm/nccl.hpp"
#include "device_vector.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <numeric>
#include <vector>

using namespace braid;

namespace {

comm::Communicator* g_world = nullptr;
std::unique_ptr<comm::Communicator> g_gpus;

BOOST_AUTO_TEST_CASE(all_reduce_sum_max_min_on_device_buffers) {
  comm::Communicator& g = *g_gpus;
  const int r = g.rank(), n = g.size();
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(r + 1) * float(i % 7);
  DeviceVector<float> dx(x);
  g.all_reduce(dx.span(), comm::ReduceOp::sum);
  const auto got = dx.host();
  for (std::size_t i = 0; i < got.size(); ++i) BOOST_TEST(got[i] == float(n * (n + 1) / 2) * float(i % 7));

  DeviceVector<double> dmax(std::vector<double>{double(r), -double(r)});
  comm::Request pending = g.iall_reduce_elements(dmax.ptr, 2, comm::DataType::f64, comm::ReduceOp::max);
  pending.wait();
  BOOST_TEST(dmax.host() == (std::vector<double>{double(n - 1), 0.0}));
  DeviceVector<std::int64_t> dmin(std::vector<std::int64_t>{r + 5});
  g.all_reduce(dmin.span(), comm::ReduceOp::min);
  BOOST_TEST(dmin.host()[0] == 5);
}

BOOST_AUTO_TEST_CASE(broadcast_and_all_gathers) {
  comm::Communicator& g = *g_gpus;
  const int r = g.rank(), n = g.size();
  DeviceVector<float> b(std::vector<float>(16, float(r)));
  g.broadcast(b.span(), n - 1);
  BOOST_TEST(b.host() == std::vector<float>(16, float(n - 1)));

  DeviceVector<float> mine(std::vector<float>(4, float(10 * r)));
  DeviceVector<float> all(std::vector<float>(std::size_t(4 * n), -1.0f));
  g.all_gather_bytes(mine.ptr, 4 * sizeof(float), all.ptr);
  const auto gathered = all.host();
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < 4; ++j) BOOST_TEST(gathered[std::size_t(4 * k + j)] == float(10 * k));

  // Rank k's part: k + 1 elements of value k, at offset 0 + 1 + ... + k.
  std::vector<std::size_t> counts;
  for (int k = 0; k < n; ++k) counts.push_back(std::size_t(k + 1));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t(0));
  std::vector<float> parts(total, -1.0f);
  const std::size_t offset = std::size_t(r * (r + 1) / 2);
  for (int j = 0; j <= r; ++j) parts[offset + std::size_t(j)] = float(r);
  DeviceVector<float> dparts(parts);
  g.all_gather_varying(dparts.span(), counts);
  std::vector<float> want;
  for (int k = 0; k < n; ++k) want.insert(want.end(), std::size_t(k + 1), float(k));
  BOOST_TEST(dparts.host() == want);
}

BOOST_AUTO_TEST_CASE(point_to_point_around_a_ring_and_a_split) {
  comm::Communicator& g = *g_gpus;
  const int r = g.rank(), n = g.size();
  if (n > 1) {
    DeviceVector<float> out(std::vector<float>(8, float(r))), in(std::vector<float>(8, -1.0f));
    comm::Request s = g.isend(std::span<const float>(out.ptr, 8), (r + 1) % n, 3);
    comm::Request q = g.irecv(in.span(), (r + n - 1) % n, 3);
    s.wait();
    q.wait();
    BOOST_TEST(in.host() == std::vector<float>(8, float((r + n - 1) % n)));
  }
  BOOST_CHECK_THROW(g.send(std::span<const float>(), r, 0), std::invalid_argument);
  auto sub = g.split(r % 2, r);
  BOOST_REQUIRE(sub);
  DeviceVector<std::int64_t> one(std::vector<std::int64_t>{1});
  sub->all_reduce(one.span(), comm::ReduceOp::sum);
  BOOST_TEST(one.host()[0] == std::int64_t((n - r % 2 + 1) / 2));
  BOOST_TEST(comm::nccl_version().rfind("NCCL 2.", 0) == 0u);
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  auto world = comm::mpi_world();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < world->size()) {
    if (world->rank() == 0)
      std::cout << "skipped: " << devices << " GPU(s) for " << world->size() << " rank(s); NCCL needs one per rank\n";
    return 77;
  }
  if (cudaSetDevice(world->rank()) != cudaSuccess) return 77;
  g_world = world.get();
  g_gpus = comm::nccl_group(*world, nullptr);
  const int rc = boost::unit_test::unit_test_main(&::init_unit_test, argc, argv);
  g_gpus.reset();
  return rc;
}
