#include "plan/measure.hpp"

#include <algorithm>
#include <chrono>

#include "plan/analytic_profile.hpp"

namespace braid::plan {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Timing time_repeated(const std::function<void()>& op, int repeats, const std::function<double()>& now, int warmup) {
  for (int i = 0; i < warmup; ++i) op();
  std::vector<double> t;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const double t0 = now();
    op();
    t.push_back(now() - t0);
  }
  Timing r;
  r.median = median(t);
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  r.spread = r.median > 0 ? (*hi - *lo) / r.median : 0;
  return r;
}

ModelProfile measure_model(const ModelShape& shape, LayerRunner& runner, int dtype_bytes, const MeasureOptions& opt) {
  const auto now = opt.now ? opt.now : std::function<double()>(steady_now);
  const MeasureGrids& g = opt.grids;
  ModelProfile m;
  m.name = shape.name.empty() ? shape.key() : shape.name;
  m.shape = shape;
  m.memory = analytic_memory(shape, dtype_bytes);
  double spread_fwd = 0, spread_bwd = 0, spread_prefill = 0, spread_decode = 0, spread_head = 0;
  auto note = [&](const std::string& what) {
    if (opt.on_point) opt.on_point(what);
  };
  auto sync = [&](const std::function<void()>& f) {
    return [&runner, f] {
      f();
      runner.synchronize();
    };
  };

  m.layer_fwd = {g.tokens, g.seq_len, std::vector<double>(g.tokens.size() * g.seq_len.size(), 0.0)};
  m.layer_bwd = m.layer_fwd;
  m.layer_prefill = m.layer_fwd;
  for (std::size_t j = 0; j < g.seq_len.size(); ++j) {
    for (std::size_t i = 0; i < g.tokens.size(); ++i) {
      const int n = static_cast<int>(g.tokens[i]), s = static_cast<int>(g.seq_len[j]);
      note("layer forward/backward");
      const Timing f = time_repeated(sync([&] { runner.layer_forward(n, s); }), opt.repeats, now);
      // Each backward needs its own forward first; only the backward is timed.
      std::vector<double> b;
      runner.layer_forward(n, s);
      runner.layer_backward();  // warm-up
      for (int r = 0; r < std::max(1, opt.repeats); ++r) {
        runner.layer_forward(n, s);
        runner.synchronize();
        const double t0 = now();
        runner.layer_backward();
        runner.synchronize();
        b.push_back(now() - t0);
      }
      std::sort(b.begin(), b.end());
      const double bm = b[b.size() / 2];
      m.layer_fwd.cell(i, j) = f.median;
      m.layer_bwd.cell(i, j) = bm;
      spread_fwd = std::max(spread_fwd, f.spread);
      spread_bwd = std::max(spread_bwd, bm > 0 ? (b.back() - b.front()) / bm : 0);
      note("layer prefill");
      const Timing p = time_repeated(sync([&] { runner.layer_prefill(n, s); }), opt.repeats, now);
      m.layer_prefill.cell(i, j) = p.median;
      spread_prefill = std::max(spread_prefill, p.spread);
    }
  }
  m.embed_fwd.x = m.head_fwd.x = m.head_bwd.x = m.embed_bwd.x = g.tokens;
  for (double tokens : g.tokens) {
    const int n = static_cast<int>(tokens);
    note("embedding and head");
    const double e = time_repeated(sync([&] { runner.embedding_forward(n); }), opt.repeats, now).median;
    m.embed_fwd.v.push_back(e);
    m.embed_bwd.v.push_back(2 * e);  // a scatter-add of the same rows: the gather's traffic twice
    const Timing hf = time_repeated(sync([&] { runner.head_forward(n); }), opt.repeats, now);
    const Timing hb = time_repeated(sync([&] { runner.head_backward(n); }), opt.repeats, now);
    m.head_fwd.v.push_back(hf.median);
    m.head_bwd.v.push_back(hb.median);
    spread_head = std::max({spread_head, hf.spread, hb.spread});
  }
  m.layer_decode = {g.batch, g.kv_len, std::vector<double>(g.batch.size() * g.kv_len.size(), 0.0)};
  const double decode_layers = std::max(1, runner.decode_layers());
  for (std::size_t i = 0; i < g.batch.size(); ++i) {
    for (std::size_t j = 0; j < g.kv_len.size(); ++j) {
      note("decode");
      runner.prepare_decode(static_cast<int>(g.batch[i]), static_cast<int>(g.kv_len[j]));
      const Timing d = time_repeated(sync([&] { runner.decode_step(); }), opt.repeats, now);
      m.layer_decode.cell(i, j) = d.median / decode_layers;
      spread_decode = std::max(spread_decode, d.spread);
    }
  }
  double spread_sample = 0;
  if (!shape.value_head) {
    m.sample.x = g.batch;
    for (double rows : g.batch) {
      note("sampling");
      const Timing t = time_repeated(sync([&] { runner.sample_rows(static_cast<int>(rows)); }), opt.repeats, now);
      m.sample.v.push_back(t.median);
      spread_sample = std::max(spread_sample, t.spread);
    }
  }
  m.bs_max = find_bs_max(m.layer_decode);
  m.spread = {{"layer_fwd", spread_fwd},
              {"layer_bwd", spread_bwd},
              {"layer_prefill", spread_prefill},
              {"head", spread_head},
              {"layer_decode", spread_decode},
              {"sample", spread_sample},
              {"repeats", opt.repeats},
              {"statistic", "median; spread = (max - min) / median, the largest over the table's points"}};
  return m;
}

void reach_shortest_context(const Experiment& e, MeasureGrids& g) {
  const auto prompts = e.prompt_len.quantiles(std::max(1, e.global_batch));
  if (prompts.empty() || g.kv_len.empty()) return;
  double lo = 8;
  while (lo * 2 <= prompts.front()) lo *= 2;
  if (lo < g.kv_len.front()) g.kv_len = pow2_grid(lo, g.kv_len.back());
}

}  // namespace braid::plan
