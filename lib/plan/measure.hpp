// Measured profiles: braid-profile times the pieces of a model on this machine
// through a LayerRunner, which the engine implements (engine_runner.hpp), at
// grid points, repeating each and keeping the median and the spread. The
// runner interface keeps this file free of any engine, so the procedure is
// testable with a runner on a virtual clock.
#pragma once

#include <functional>
#include <vector>

#include "plan/experiment.hpp"
#include "plan/profile.hpp"

namespace braid::plan {

class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  // One decoder layer over `tokens` tokens in sequences of `seq_len` (tokens <= seq_len: one sequence).
  virtual void layer_forward(int tokens, int seq_len) = 0;
  virtual void layer_backward() = 0;  // of the last layer_forward
  // One decoder layer through the KV-cache path, as generation prefills: `tokens`
  // tokens as tokens/seq_len segments of seq_len into empty cache slots.
  virtual void layer_prefill(int tokens, int seq_len) = 0;
  virtual void embedding_forward(int tokens) = 0;
  virtual void head_forward(int tokens) = 0;
  virtual void head_backward(int tokens) = 0;
  // Prepares `batch` sequences with kv_len cached tokens; decode_step then runs one step of them all.
  virtual void prepare_decode(int batch, int kv_len) = 0;
  virtual void decode_step() = 0;
  // Draws the next token of `rows` sequences from rows of logits, as the generator does.
  virtual void sample_rows(int rows) = 0;
  // How many decoder layers one decode_step runs through; the table keeps a step's time / this.
  virtual int decode_layers() const { return 1; }
  virtual void synchronize() {}  // waits for queued device work (GPU backends)
};

struct MeasureGrids {
  std::vector<double> tokens = pow2_grid(16, 4096);
  std::vector<double> seq_len = pow2_grid(64, 1024);
  std::vector<double> batch = pow2_grid(1, 64);
  std::vector<double> kv_len = pow2_grid(64, 1024);
};

// A decode step's cost falls with its KV length, and a table is not read below its first
// column (a shorter context costs what the first column says): the KV lengths measured start
// at the experiment's shortest prompt (the power of two at or below it, 8 at the least), so
// that the short contexts of its first decode steps are measured, not taken at 64's cost.
void reach_shortest_context(const Experiment& e, MeasureGrids& g);

struct MeasureOptions {
  MeasureGrids grids;
  int repeats = 5;  // timed runs per point, after one untimed warm-up
  std::function<double()> now;  // seconds; steady_clock when empty
  std::function<void(const std::string&)> on_point;  // progress
};

// Times every table of `shape` with `runner`; memory is the analytic count at
// dtype_bytes (what the engine allocates for weights, gradients, optimizer).
ModelProfile measure_model(const ModelShape& shape, LayerRunner& runner, int dtype_bytes, const MeasureOptions& opt);

// The median of the timings of `op` (after `warmup` untimed runs) and the spread (max - min) / median.
struct Timing {
  double median = 0;
  double spread = 0;
};
Timing time_repeated(const std::function<void()>& op, int repeats, const std::function<double()>& now,
                     int warmup = 1);

}  // namespace braid::plan
