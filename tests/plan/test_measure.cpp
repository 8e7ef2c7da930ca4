// The measuring procedure on a virtual clock: medians, spreads, tables, BS_max.
#define BOOST_TEST_MODULE plan_measure
#include <boost/test/unit_test.hpp>

#include "plan/measure.hpp"
#include "tests/plan/shapes.hpp"

using namespace braid::plan;

namespace {

// Each operation advances a virtual clock by a known cost; every third run of
// an operation is 50% slower, as if disturbed, which the median must ignore.
class FakeRunner final : public LayerRunner {
 public:
  explicit FakeRunner(int decode_layers = 1) : decode_layers_(decode_layers) {}
  double clock = 0;
  void layer_forward(int tokens, int seq_len) override {
    tokens_ = tokens;
    tick(1e-6 * tokens + 1e-9 * tokens * seq_len);
  }
  void layer_backward() override { tick(2e-6 * tokens_); }
  // The KV-cache path: a quarter slower than the packed forward.
  void layer_prefill(int tokens, int seq_len) override { tick(1.25e-6 * tokens + 1e-9 * tokens * seq_len); }
  void embedding_forward(int tokens) override { tick(1e-8 * tokens); }
  void head_forward(int tokens) override { tick(3e-6 * tokens); }
  void head_backward(int tokens) override { tick(6e-6 * tokens); }
  void prepare_decode(int batch, int kv_len) override {
    batch_ = batch;
    kv_ = kv_len;
  }
  // Flat up to a batch of 8, then linear: BS_max is 8. A step runs through
  // `decode_layers` layers, each costing this.
  void decode_step() override { tick(decode_layers_ * (1e-3 * std::max(1.0, batch_ / 8.0) + 1e-8 * batch_ * kv_)); }
  int decode_layers() const override { return decode_layers_; }
  void sample_rows(int rows) override { tick(2e-7 * rows); }

 private:
  void tick(double t) { clock += (++calls_ % 3 == 0) ? 1.5 * t : t; }
  int decode_layers_;
  int tokens_ = 0, batch_ = 0, kv_ = 0;
  long calls_ = 0;
};

ModelShape fake_shape(int layers) { return braid::test::llama_shape("fake", 64, 128, layers, 4, 100); }

}  // namespace

BOOST_AUTO_TEST_CASE(median_ignores_a_disturbed_run_and_spread_reports_it) {
  double clock = 0;
  int k = 0;
  const Timing t = time_repeated([&] { clock += (++k == 3) ? 3.0 : 1.0; }, 5, [&] { return clock; }, 0);
  BOOST_TEST(t.median == 1.0);
  BOOST_TEST(t.spread == 2.0);
}

BOOST_AUTO_TEST_CASE(measured_tables_hold_the_runner_costs) {
  FakeRunner r;
  MeasureOptions o;
  o.repeats = 5;
  o.grids = {{16, 64, 256}, {64, 256}, {1, 2, 4, 8, 16, 32}, {64, 128}};
  o.now = [&] { return r.clock; };
  int points = 0;
  o.on_point = [&](const std::string&) { ++points; };
  const ModelShape s = fake_shape(2);
  const ModelProfile m = measure_model(s, r, 4, o);
  BOOST_TEST(points == 3 * 2 * 2 + 3 + 6 * 2 + 6);
  BOOST_TEST(m.layer_fwd.cell(1, 1) == 1e-6 * 64 + 1e-9 * 64 * 256, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.layer_bwd.cell(2, 0) == 2e-6 * 256, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.layer_prefill.x == m.layer_fwd.x);
  BOOST_TEST(m.layer_prefill.y == m.layer_fwd.y);
  BOOST_TEST(m.layer_prefill.cell(2, 1) == 1.25e-6 * 256 + 1e-9 * 256 * 256, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.spread["layer_prefill"].get<double>() > 0.4);
  BOOST_TEST(m.head_bwd.at(64) == 6e-6 * 64, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.layer_decode.cell(5, 1) == 4e-3 + 1e-8 * 32 * 128, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.bs_max == 8.0);
  BOOST_TEST(m.sample.x == o.grids.batch);
  BOOST_TEST(m.sample.at(16) == 2e-7 * 16, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(m.spread["layer_fwd"].get<double>() > 0.4);
  BOOST_TEST(m.memory.weights == 4 * s.layer_params());
}

// A runner whose decode step runs through several layers (so that their weights
// and caches leave the last-level cache as a model's do): the table keeps one
// layer's share, the same as a runner of one layer would measure.
BOOST_AUTO_TEST_CASE(decode_steps_through_several_layers_are_kept_per_layer) {
  ModelShape s = fake_shape(3);
  auto measure = [&](int layers) {
    FakeRunner r(layers);
    MeasureOptions o;
    o.repeats = 3;
    o.grids = {{16}, {64}, {1, 8, 32}, {64, 128}};
    o.now = [&] { return r.clock; };
    return measure_model(s, r, 4, o);
  };
  const ModelProfile one = measure(1), three = measure(3);
  BOOST_TEST(three.layer_decode.cell(2, 1) == 4e-3 + 1e-8 * 32 * 128, boost::test_tools::tolerance(1e-12));
  for (std::size_t i = 0; i < one.layer_decode.v.size(); ++i) {
    BOOST_TEST(three.layer_decode.v[i] == one.layer_decode.v[i], boost::test_tools::tolerance(1e-12));
  }
  BOOST_TEST(three.bs_max == one.bs_max);
  // A value head samples nothing: no sampling table.
  s.value_head = true;
  BOOST_TEST(measure(1).sample.v.empty());
}

BOOST_AUTO_TEST_CASE(kv_lengths_reach_the_experiments_shortest_prompt) {
  Experiment e;
  e.global_batch = 64;
  e.prompt_len.kind = "uniform";
  e.prompt_len.min = 20;
  e.prompt_len.max = 40;
  MeasureGrids g;  // KV lengths 64 .. 1024
  reach_shortest_context(e, g);
  BOOST_TEST(g.kv_len == pow2_grid(16, 1024), boost::test_tools::per_element());
  // Prompts of 3 tokens: down to 8, no further.
  e.prompt_len = {};
  e.prompt_len.value = 3;
  g = {};
  reach_shortest_context(e, g);
  BOOST_TEST(g.kv_len.front() == 8);
  // Prompts longer than the first column leave the grid as it is.
  e.prompt_len.value = 300;
  g = {};
  reach_shortest_context(e, g);
  BOOST_TEST(g.kv_len == MeasureGrids{}.kv_len, boost::test_tools::per_element());
}
