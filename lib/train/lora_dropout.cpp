#include "train/lora_dropout.hpp"

#include "backend/dropout_draw.hpp"

namespace braid::train {

LoraDropout::LoraDropout(const model::Model& m, const io::SampleBatch& mb, std::uint64_t run_seed,
                         std::int64_t step) {
  const model::LoraOptions& lo = m.options().lora;
  if (!lo.enabled() || !(lo.dropout > 0) || !m.adapters_enabled()) return;
  keys_.reserve(mb.size());
  for (std::size_t s = 0; s < mb.size(); ++s) {
    std::uint64_t h = backend::mix64(std::uint64_t(mb.sample_id[s]) + 0x9e3779b97f4a7c15ull);
    for (std::int64_t t = mb.offsets[s]; t < mb.offsets[s + 1]; ++t)
      h = backend::mix64(h ^ std::uint64_t(std::uint32_t(mb.tokens[std::size_t(t)])));
    keys_.push_back(h);
  }
  draw_ = {.sequence_keys = keys_, .seed = backend::mix64(run_seed ^ backend::mix64(std::uint64_t(step)))};
}

}  // namespace braid::train
