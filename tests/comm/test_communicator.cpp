#define BOOST_TEST_MODULE comm
#include <boost/test/unit_test.hpp>

#include "comm/job.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"
#include "core/error.hpp"

#include <numeric>
#include <string>
#include <vector>
#include "tests/common/mpi_fixture.hpp"

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

std::vector<float> pattern(int rank, int n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(rank * 1000 + i) + 0.5f;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(blocking_ring) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  if (n == 1) return;  // a ring needs a peer
  const auto mine = pattern(r, 37);
  std::vector<float> got(37, -1.0f);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Even ranks send first so that blocking calls cannot all wait on each other.
  if (r % 2 == 0) {
    world->send(std::span<const float>(mine), next, 5);
    world->recv(std::span<float>(got), prev, 5);
  } else {
    world->recv(std::span<float>(got), prev, 5);
    world->send(std::span<const float>(mine), next, 5);
  }
  BOOST_TEST(got == pattern(prev, 37), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(nonblocking_tags_match_out_of_order) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  // Every rank sends two tagged messages to every rank (itself included) and receives
  // them in the opposite tag order: matching is by (source, tag), not arrival.
  std::vector<std::vector<float>> out, in;
  std::vector<comm::Request> reqs;
  for (int peer = 0; peer < n; ++peer) {
    for (int tag : {1, 2}) out.push_back(pattern(r * 10 + tag, 8 + peer));
  }
  in.resize(out.size());
  for (int peer = 0; peer < n; ++peer) {
    for (int tag : {2, 1}) {
      auto& buf = in[static_cast<std::size_t>(2 * peer + tag - 1)];
      buf.assign(static_cast<std::size_t>(8 + r), 0.0f);
      reqs.push_back(world->irecv(std::span<float>(buf), peer, tag));
    }
  }
  for (int peer = 0; peer < n; ++peer) {
    for (int tag : {1, 2}) {
      reqs.push_back(world->isend(std::span<const float>(out[static_cast<std::size_t>(2 * peer + tag - 1)]), peer, tag));
    }
  }
  comm::wait_all(reqs);
  for (int peer = 0; peer < n; ++peer) {
    for (int tag : {1, 2}) {
      BOOST_TEST(in[static_cast<std::size_t>(2 * peer + tag - 1)] == pattern(peer * 10 + tag, 8 + r),
                 boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(request_test_reports_completion) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  std::vector<std::int32_t> x{r, r + 1, r + 2}, y(3, -1);
  comm::Request rr = world->irecv(std::span<std::int32_t>(y), (r + n - 1) % n, 9);
  comm::Request sr = world->isend(std::span<const std::int32_t>(x), (r + 1) % n, 9);
  while (!rr.test()) {
  }
  BOOST_TEST(!rr.active());
  sr.wait();
  const int prev = (r + n - 1) % n;
  BOOST_TEST(y == (std::vector<std::int32_t>{prev, prev + 1, prev + 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_reduce_sums_every_type) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  std::vector<float> f{1.0f * r, 2.0f, -0.5f};
  std::vector<double> d{0.25 * r, 1e300 / n};
  std::vector<std::int64_t> i{r, std::int64_t{1} << 40};
  world->all_reduce_sum(std::span<float>(f));
  world->all_reduce_sum(std::span<double>(d));
  world->all_reduce_sum(std::span<std::int64_t>(i));
  const double ranks_sum = n * (n - 1) / 2.0;
  BOOST_TEST(f[0] == ranks_sum);
  BOOST_TEST(f[1] == 2.0 * n);
  BOOST_TEST(f[2] == -0.5 * n);
  BOOST_TEST(d[0] == 0.25 * ranks_sum);
  BOOST_TEST(d[1] == 1e300, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(i[0] == static_cast<std::int64_t>(ranks_sum));
  BOOST_TEST(i[1] == n * (std::int64_t{1} << 40));
}

BOOST_AUTO_TEST_CASE(broadcast_from_the_last_rank) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  std::string text = r == n - 1 ? std::string("from the last rank, ") + std::string(1000, 'x') : std::string("?");
  world->broadcast(text, n - 1);
  BOOST_TEST(text.size() == 1020u);
  BOOST_TEST(text.substr(0, 19) == "from the last rank,");
  std::vector<double> v(4, r == n - 1 ? 3.5 : 0.0);
  world->broadcast(std::span<double>(v), n - 1);
  BOOST_TEST(v == std::vector<double>(4, 3.5), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(split_and_group) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  // Even and odd ranks: each group sums only its own members.
  auto parity = world->split(r % 2, r);
  BOOST_REQUIRE(parity);
  BOOST_TEST(parity->size() == (n + 1 - r % 2) / 2);
  BOOST_TEST(parity->rank() == r / 2);
  std::vector<std::int64_t> s{r};
  parity->all_reduce_sum(std::span<std::int64_t>(s));
  std::int64_t want = 0;
  for (int q = r % 2; q < n; q += 2) want += q;
  BOOST_TEST(s[0] == want);

  // The group {last, first} in that order; the others are outside it.
  const std::vector<int> members = n > 1 ? std::vector<int>{n - 1, 0} : std::vector<int>{0};
  auto ends = world->group(members);
  const bool member = r == 0 || r == n - 1;
  BOOST_TEST(static_cast<bool>(ends) == member);
  if (ends) {
    BOOST_TEST(ends->size() == static_cast<int>(members.size()));
    BOOST_TEST(ends->rank() == (r == n - 1 ? 0 : 1));
    std::vector<double> x{1.0};
    ends->all_reduce_sum(std::span<double>(x));
    BOOST_TEST(x[0] == static_cast<double>(members.size()));
  }
  world->barrier();
  BOOST_TEST(world->max_tag() >= 32767);
}

BOOST_AUTO_TEST_CASE(all_reduce_min_and_max) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  // Rank r holds r and -r (and a value only the last rank holds high): min and max
  // pick one rank's value each, element by element.
  std::vector<double> d{1.5 * r, -1.5 * r, r == n - 1 ? 1e300 : 0.0};
  std::vector<std::int64_t> i{r, -r};
  std::vector<float> f{static_cast<float>(r) + 0.25f};
  auto dmin = d, dmax = d;
  auto imin = i, imax = i;
  auto fmax = f;
  world->all_reduce(std::span<double>(dmin), comm::ReduceOp::min);
  world->all_reduce(std::span<double>(dmax), comm::ReduceOp::max);
  world->all_reduce(std::span<std::int64_t>(imin), comm::ReduceOp::min);
  world->all_reduce(std::span<std::int64_t>(imax), comm::ReduceOp::max);
  world->all_reduce(std::span<float>(fmax), comm::ReduceOp::max);
  BOOST_TEST(dmin == (std::vector<double>{0.0, -1.5 * (n - 1), n == 1 ? 1e300 : 0.0}), boost::test_tools::per_element());
  BOOST_TEST(dmax == (std::vector<double>{1.5 * (n - 1), 0.0, 1e300}), boost::test_tools::per_element());
  BOOST_TEST(imin == (std::vector<std::int64_t>{0, -(n - 1)}), boost::test_tools::per_element());
  BOOST_TEST(imax == (std::vector<std::int64_t>{n - 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(fmax[0] == static_cast<float>(n - 1) + 0.25f);
}

BOOST_AUTO_TEST_CASE(all_gather_in_rank_order) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  const std::vector<double> mine{1.0 * r, 10.0 * r + 0.5, -1.0};
  const std::vector<double> all = world->all_gather(std::span<const double>(mine));
  BOOST_REQUIRE(all.size() == 3u * static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) {
    const auto at = 3 * static_cast<std::size_t>(q);
    BOOST_TEST(all[at] == 1.0 * q);
    BOOST_TEST(all[at + 1] == 10.0 * q + 0.5);
    BOOST_TEST(all[at + 2] == -1.0);
  }
}

BOOST_AUTO_TEST_CASE(what_a_tool_asks_of_mpi) {
  auto world = comm::mpi_world();
  // Under mpirun (the _np tests) the launcher's environment says so; a world of one
  // may be either (ctest's plain run, or mpirun -np 1).
  if (world->size() > 1) BOOST_TEST(comm::launched_by_mpi());
  const std::string host = comm::processor_name();
  BOOST_TEST(!host.empty());
  const std::string lib = comm::mpi_library_version();
  BOOST_TEST(!lib.empty());
  BOOST_TEST(lib.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(all_gather_varying_in_place) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  // Rank q's part holds q + 1 elements (the last rank none when there are several):
  // parts of different sizes, one of them empty.
  std::vector<std::size_t> counts(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) counts[std::size_t(q)] = (n > 1 && q == n - 1) ? 0 : std::size_t(q + 1);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<float> all(total, -1.0f);
  std::size_t at = 0;
  for (int q = 0; q < r; ++q) at += counts[std::size_t(q)];
  for (std::size_t k = 0; k < counts[std::size_t(r)]; ++k) all[at + k] = 100.0f * r + float(k);
  world->all_gather_varying(std::span<float>(all), counts);
  at = 0;
  for (int q = 0; q < n; ++q) {
    for (std::size_t k = 0; k < counts[std::size_t(q)]; ++k) BOOST_TEST(all[at + k] == 100.0f * q + float(k));
    at += counts[std::size_t(q)];
  }
  BOOST_CHECK_THROW(world->all_gather_varying(std::span<float>(all.data(), total + 1), counts), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(bucketed_all_reduce_sums_every_bucket) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  // 1000 elements in buckets of 64 (the last one short), 2 in flight: each element the
  // sum over ranks, as one all-reduce of the whole gives it.
  for (const std::size_t bucket : {std::size_t{64}, std::size_t{0}, std::size_t{1000}, std::size_t{7}}) {
    std::vector<float> x(1000), whole(1000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = whole[i] = float(i % 17) * 0.5f + float(r);
    comm::all_reduce_bucketed(*world, std::span<float>(x), bucket, 2);
    world->all_reduce_sum(std::span<float>(whole));
    BOOST_TEST(x == whole, boost::test_tools::per_element());
    BOOST_TEST(x[999] == float(999 % 17) * 0.5f * n + float(n * (n - 1) / 2));
  }
  // Nonblocking reductions left in flight together complete in any wait order.
  std::vector<double> a{1.0 * r}, b{2.0 * r};
  comm::Request ra = world->iall_reduce_elements(a.data(), 1, comm::DataType::f64, comm::ReduceOp::sum);
  comm::Request rb = world->iall_reduce_elements(b.data(), 1, comm::DataType::f64, comm::ReduceOp::max);
  rb.wait();
  ra.wait();
  BOOST_TEST(a[0] == double(n * (n - 1) / 2));
  BOOST_TEST(b[0] == 2.0 * (n - 1));
}

// The mesh's groups: tp ranks adjacent, the cross group one rank per device.
BOOST_AUTO_TEST_CASE(mesh_groups_have_the_documented_layout) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp != 0) {
      BOOST_CHECK_THROW(comm::Mesh(*world, tp), braid::UsageError);
      continue;
    }
    comm::Mesh mesh(*world, tp);
    BOOST_TEST(mesh.ranks() == n);
    BOOST_TEST(mesh.devices() == n / tp);
    BOOST_TEST(mesh.rank_of(mesh.device(), mesh.tp_rank()) == r);
    const std::int64_t me = r;
    if (tp == 1) {
      BOOST_TEST(mesh.tp_group() == nullptr);
    } else {
      BOOST_REQUIRE(mesh.tp_group() != nullptr);
      BOOST_TEST(mesh.tp_group()->rank() == mesh.tp_rank());
      const auto members = mesh.tp_group()->all_gather(std::span<const std::int64_t>(&me, 1));
      for (int t = 0; t < tp; ++t) BOOST_TEST(members[static_cast<std::size_t>(t)] == mesh.rank_of(mesh.device(), t));
    }
    if (n / tp == 1) {
      BOOST_TEST(mesh.cross_group() == nullptr);
    } else {
      BOOST_REQUIRE(mesh.cross_group() != nullptr);
      BOOST_TEST(mesh.cross_group()->rank() == mesh.device());
      const auto members = mesh.cross_group()->all_gather(std::span<const std::int64_t>(&me, 1));
      for (int d = 0; d < n / tp; ++d) BOOST_TEST(members[static_cast<std::size_t>(d)] == mesh.rank_of(d, mesh.tp_rank()));
    }
  }
  BOOST_CHECK_THROW(comm::Mesh(*world, 0), braid::UsageError);
}

// A world of one (comm::solo, what comm::Job gives a process no launcher started): the
// collectives give this rank's own values, a split or group is another world of one, and a
// message to a peer is refused (there is none). Alone and under mpirun alike.
BOOST_AUTO_TEST_CASE(a_world_of_one_rank) {
  auto one = comm::solo();
  BOOST_TEST(one->rank() == 0);
  BOOST_TEST(one->size() == 1);
  std::vector<double> v = {1.5, -2.0, 3.25};
  one->all_reduce_sum(std::span<double>(v));
  one->all_reduce(std::span<double>(v), comm::ReduceOp::max);
  BOOST_TEST(v == (std::vector<double>{1.5, -2.0, 3.25}), boost::test_tools::per_element());
  const auto all = one->all_gather(std::span<const double>(v));
  BOOST_TEST(all == v, boost::test_tools::per_element());
  std::vector<std::int32_t> order = {3, 1, 2};
  one->broadcast(std::span<std::int32_t>(order), 0);
  BOOST_TEST(order == (std::vector<std::int32_t>{3, 1, 2}), boost::test_tools::per_element());
  const std::size_t counts[] = {3};
  one->all_gather_varying(std::span<double>(v), std::span<const std::size_t>(counts));
  BOOST_TEST(v[2] == 3.25);
  one->barrier();
  BOOST_TEST(one->split(-1, 0) == nullptr);
  const int just_me[] = {0};
  auto again = one->group(std::span<const int>(just_me));
  BOOST_REQUIRE(again != nullptr);
  BOOST_TEST(again->size() == 1);
  BOOST_CHECK_THROW(one->send(std::span<const double>(v), 1, 0), std::logic_error);
  BOOST_CHECK_THROW(one->broadcast(std::span<std::int32_t>(order), 1), std::logic_error);
}
