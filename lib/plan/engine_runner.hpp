// The LayerRunner braid-profile's measured mode uses: braid's own engine
// (lib/model on a lib/backend backend) running one decoder layer as a
// middle pipeline stage, the embedding as a first stage, and the LM head.
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "plan/measure.hpp"

namespace braid::plan {

// Limits of what the runner will be asked (buffers are sized for them).
struct RunnerLimits {
  int max_tokens = 4096;
  int max_seq_len = 1024;
  int max_batch = 64;
  int max_kv_len = 1024;
  // Storage of the decoder layers' weights (--dtype); the embedding and head probes stay f32.
  backend::DType dtype = backend::DType::f32;
};

std::unique_ptr<LayerRunner> make_engine_runner(const ModelShape& shape, backend::Backend& be,
                                                const RunnerLimits& limits);

}  // namespace braid::plan
