// The paged KV cache's ops (paged_kv_write, paged_attention) on the backend named by
// --backend, against the CPU in f64, for a cache in f32 and in bf16 (the bf16 rounding
// happens once, at the write, the same on both sides, so the tolerance is f32's), and the
// CPU's paged attention against its contiguous attention_forward (the block tables read
// right). Rows: sequences of 1 to 1100 keys in shuffled blocks (longer than one split of
// the CUDA kernel), two query rows of one sequence, a skipped row; also with Gemma's score
// options (a scale of its own, soft-capped scores) and a sliding window shorter than most
// contexts (the CUDA kernel's splits before the window then write nothing). A backend absent
// from this build or machine exits 77 (ctest: skipped).
//
//   test_paged_ops [boost.test args] -- --backend=cpu-f32|cuda-f32
#define BOOST_TEST_MODULE paged_ops
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "tests/backend/backend_target.hpp"
#include "tests/common/arrays.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace be = braid::backend;

namespace {

be::Backend* g_backend = nullptr;

template <typename T>
be::Buffer<T> upload(be::Backend& b, const std::vector<double>& host) {
  be::Buffer<T> buf(b, host.size());
  std::vector<T> typed(host.begin(), host.end());
  if (!typed.empty()) b.copy_to_device(buf.data(), typed.data(), typed.size() * sizeof(T));
  return buf;
}

template <typename T>
std::vector<double> download(be::Backend& b, const be::Buffer<T>& buf) {
  std::vector<T> typed(buf.size());
  if (!typed.empty()) b.copy_to_host(typed.data(), buf.data(), typed.size() * sizeof(T));
  return {typed.begin(), typed.end()};
}

std::vector<double> random_values(std::size_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  braid::Rng rng(seed, 23);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return v;
}

using braid::test::nmse;
using braid::test::upload_ids;

// One case: sequences' contexts, their keys written through the paged write into shuffled
// blocks, then one attention call over the query rows.
struct PagedCase {
  int n_heads, n_kv_heads, head_dim;
  be::DType cache = be::DType::f32;
  int block_size = 16;
  std::vector<std::int32_t> seq_len{1, 17, 600, 1100, 40};  // keys written per sequence
  // Query rows: (sequence, keys seen); 0 keys: skipped.
  std::vector<std::pair<int, int>> rows{{0, 1}, {1, 17}, {2, 600}, {3, 1100}, {4, 39}, {4, 40}, {1, 0}};
  std::int64_t max_context = 1500;
  double scale = 0, softcap = 0;
  std::int64_t window = 0;

  std::int64_t row() const { return std::int64_t(n_kv_heads) * head_dim; }
  int max_blocks() const { return int((max_context + block_size - 1) / block_size); }
  std::int64_t blocks() const {
    std::int64_t n = 0;
    for (auto l : seq_len) n += (l + block_size - 1) / block_size;
    return n + 3;  // some never used
  }
  // Sequence s's block table: its blocks taken from a shuffled pool.
  std::vector<std::int32_t> tables() const {
    std::vector<std::int32_t> pool(static_cast<std::size_t>(blocks()));
    std::iota(pool.begin(), pool.end(), 0);
    braid::Rng rng(99, 1);
    for (std::size_t i = pool.size() - 1; i > 0; --i) std::swap(pool[i], pool[std::size_t(rng.uniform() * double(i + 1))]);
    std::vector<std::int32_t> t(seq_len.size() * std::size_t(max_blocks()), -1);
    std::size_t next = 0;
    for (std::size_t s = 0; s < seq_len.size(); ++s)
      for (int b = 0; b * block_size < seq_len[s]; ++b) t[s * std::size_t(max_blocks()) + std::size_t(b)] = pool[next++];
    return t;
  }
  std::int64_t total_keys() const { return std::accumulate(seq_len.begin(), seq_len.end(), std::int64_t(0)); }
  std::int64_t q_stride() const { return std::int64_t(n_heads) * head_dim + 3; }

  // Writes every sequence's keys and values (rows of stride row()+2 in k_src order), then
  // attends; returns the output rows.
  template <typename T>
  std::vector<double> run(be::Backend& b) const {
    const auto table = tables();
    std::vector<std::int32_t> slots;
    for (std::size_t s = 0; s < seq_len.size(); ++s)
      for (int p = 0; p < seq_len[s]; ++p)
        slots.push_back(table[s * std::size_t(max_blocks()) + std::size_t(p / block_size)] * block_size + p % block_size);
    slots.push_back(-1);  // a padding row: written nowhere
    const std::int64_t n_src = std::int64_t(slots.size()), src_stride = row() + 2;
    const auto k_src = upload<T>(b, random_values(std::size_t(n_src * src_stride), 31, -2, 2));
    const auto v_src = upload<T>(b, random_values(std::size_t(n_src * src_stride), 32));
    // "f32": the ops' own type (f64 for the reference; the inputs are floats either way).
    const be::DType stored = cache == be::DType::bf16 ? be::DType::bf16 : be::dtype_of<T>();
    const std::size_t cache_bytes = std::size_t(blocks() * block_size * row()) * be::dtype_size(stored);
    be::Buffer<std::byte> kc(b, cache_bytes), vc(b, cache_bytes);
    const be::PagedKV kv{kc.data(), vc.data(), stored, block_size, row()};
    const auto d_slots = upload_ids(b, slots);
    b.ops<T>().paged_kv_write(n_src, k_src.data(), v_src.data(), src_stride, d_slots.data(), kv);

    std::vector<std::int32_t> row_seq, row_ctx;
    for (auto [s, ctx] : rows) {
      row_seq.push_back(s);
      row_ctx.push_back(ctx);
    }
    const auto n = std::int64_t(rows.size());
    const auto d_tables = upload_ids(b, table), d_seq = upload_ids(b, row_seq), d_ctx = upload_ids(b, row_ctx);
    const auto q = upload<T>(b, random_values(std::size_t(n * q_stride()), 33, -2, 2));
    // Output starts as a marker: the skipped row must keep it.
    auto out = upload<T>(b, std::vector<double>(std::size_t(n * n_heads * head_dim), 7.0));
    const be::AttentionDims dims{n_heads, n_kv_heads, head_dim, q_stride(), 0, scale, softcap, window};
    b.ops<T>().paged_attention(dims, n, q.data(), kv,
                               {d_tables.data(), max_blocks(), d_seq.data(), d_ctx.data(), max_context}, out.data());
    return download(b, out);
  }

  // The same rows by the contiguous attention_forward over the keys as written (rounded
  // to the cache's type), on the CPU in f64.
  std::vector<double> contiguous(be::Backend& cpu) const {
    const std::int64_t src_stride = row() + 2;
    std::vector<double> k = random_values(std::size_t((total_keys() + 1) * src_stride), 31, -2, 2);
    std::vector<double> v = random_values(std::size_t((total_keys() + 1) * src_stride), 32);
    if (cache == be::DType::bf16) {
      for (double& x : k) x = be::bf16_to_float(be::float_to_bf16(float(x)));
      for (double& x : v) x = be::bf16_to_float(be::float_to_bf16(float(x)));
    }
    std::vector<std::int64_t> first(seq_len.size(), 0);
    for (std::size_t s = 1; s < seq_len.size(); ++s) first[s] = first[s - 1] + seq_len[s - 1];
    const auto n = std::int64_t(rows.size());
    std::vector<be::AttentionSegment> segs;
    for (std::int64_t r = 0; r < n; ++r) {
      const auto [s, ctx] = rows[std::size_t(r)];
      if (ctx > 0) segs.push_back({r, 1, first[std::size_t(s)], ctx - 1});
    }
    const auto kb = upload<double>(cpu, k), vb = upload<double>(cpu, v);
    const auto q = upload<double>(cpu, random_values(std::size_t(n * q_stride()), 33, -2, 2));
    auto out = upload<double>(cpu, std::vector<double>(std::size_t(n * n_heads * head_dim), 7.0));
    be::Buffer<double> lse(cpu, std::size_t(n * n_heads));
    const be::AttentionDims dims{n_heads, n_kv_heads, head_dim, q_stride(), src_stride, scale, softcap, window};
    cpu.ops<double>().attention_forward(dims, segs, q.data(), kb.data(), vb.data(), out.data(), lse.data());
    return download(cpu, out);
  }
};

void check(const PagedCase& c) {
  BOOST_TEST_CONTEXT("heads " << c.n_heads << "/" << c.n_kv_heads << " d" << c.head_dim << " cache "
                              << be::dtype_name(c.cache) << " scale " << c.scale << " softcap " << c.softcap
                              << " window " << c.window) {
    auto cpu = be::make_cpu_backend(2);
    const auto ref = c.run<double>(*cpu);
    const auto contiguous = c.contiguous(*cpu);
    // The f64 reference reads its blocks right: the contiguous kernel's numbers.
    BOOST_TEST(nmse(ref, contiguous) <= 1e-24, "paged vs contiguous on the CPU: NMSE " << nmse(ref, contiguous));
    if (!g_backend->supports(be::Op::paged_attention, c.cache)) {
      BOOST_TEST_MESSAGE(g_backend->name() << " has no " << be::dtype_name(c.cache) << " cache: skipped");
      return;
    }
    const auto got = c.run<float>(*g_backend);
    bool finite = true;
    for (double x : got) finite = finite && std::isfinite(x);
    BOOST_TEST(finite);
    const double e = nmse(got, ref);
    BOOST_TEST_MESSAGE(g_backend->name() << ": NMSE " << e);
    BOOST_TEST(e <= 1e-10, "NMSE " << e);
    // A skipped row keeps what was there.
    const std::size_t w = std::size_t(c.n_heads * c.head_dim);
    for (std::size_t r = 0; r < c.rows.size(); ++r) {
      if (c.rows[r].second > 0) continue;
      for (std::size_t i = r * w; i < (r + 1) * w; ++i) BOOST_REQUIRE_EQUAL(got[i], 7.0);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(paged_attention_matches_the_reference) {
  for (be::DType cache : {be::DType::f32, be::DType::bf16}) {
    check({.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .cache = cache});     // grouped-query, 4 per kv head
    check({.n_heads = 4, .n_kv_heads = 4, .head_dim = 32, .cache = cache});     // multi-head
    check({.n_heads = 6, .n_kv_heads = 1, .head_dim = 160, .cache = cache});    // multi-query, head_dim > 128
  }
  // Another block size, and every row inside one split.
  check({.n_heads = 16, .n_kv_heads = 8, .head_dim = 128, .block_size = 32, .seq_len = {5, 300},
         .rows = {{1, 300}, {0, 5}, {1, 150}}, .max_context = 320});
  // Gemma: query_pre_attn_scalar's scale, soft-capped scores, a sliding window (in and past
  // the first split), alone and together.
  for (be::DType cache : {be::DType::f32, be::DType::bf16}) {
    check({.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .cache = cache, .window = 100});
    check({.n_heads = 4, .n_kv_heads = 2, .head_dim = 128, .cache = cache, .scale = 0.3, .softcap = 5.0});
    check({.n_heads = 4, .n_kv_heads = 1, .head_dim = 32, .cache = cache, .scale = 0.5, .softcap = 3.0, .window = 20});
  }
}

// A sliding window changes what a long context's query sees, and a short context's not at all.
BOOST_AUTO_TEST_CASE(a_window_is_seen) {
  auto cpu = be::make_cpu_backend(1);
  PagedCase c{.n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .seq_len = {30, 40}, .rows = {{0, 30}, {1, 10}},
              .max_context = 64};
  PagedCase windowed = c;
  windowed.window = 12;
  const auto full = c.run<double>(*cpu), win = windowed.run<double>(*cpu);
  const std::size_t w = 4 * 16;
  const std::vector<double> long_full(full.begin(), full.begin() + long(w)), long_win(win.begin(), win.begin() + long(w));
  const std::vector<double> short_full(full.begin() + long(w), full.end()), short_win(win.begin() + long(w), win.end());
  BOOST_TEST(nmse(long_win, long_full) > 1e-6);
  BOOST_TEST(short_win == short_full);
}

// A wrong block table is seen: the harness compares what it should.
BOOST_AUTO_TEST_CASE(a_wrong_block_is_seen) {
  auto cpu = be::make_cpu_backend(1);
  PagedCase c{.n_heads = 4, .n_kv_heads = 2, .head_dim = 16};
  const auto ref = c.contiguous(*cpu);
  PagedCase shorter = c;
  shorter.rows[3].second = 1000;   // 100 keys fewer
  BOOST_TEST(nmse(shorter.run<double>(*cpu), ref) > 1e-6);
}

int main(int argc, char** argv) {
  const auto target = braid::test::parse_backend_target(argc, argv, "cpu-f32", "test_paged_ops", "cpu-f32, cuda-f32");
  if (!target) return 2;
  return braid::test::run_on_target(*target, g_backend, &::init_unit_test);
}
