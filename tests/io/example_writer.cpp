// Writes the sample shard and weight shard that tests/io/cli_h5py_interop.sh
// reads with h5py and h5dump: `example_writer SAMPLES.h5 WEIGHTS.h5`.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: example_writer SAMPLES.h5 WEIGHTS.h5\n");
    return 2;
  }
  try {
    using namespace braid::io;
    SampleBatch b;
    b.logprobs_actor.emplace();
    b.reward.emplace();
    const std::int32_t eos = 257;  // the byte tokenizer's end of sequence
    b.add(std::vector<std::int32_t>{'2', '+', '2', '=', '4', eos}, 4, 10);
    b.add(std::vector<std::int32_t>{'H', 'e', 'l', 'l', 'o'}, 5, 11);
    (*b.logprobs_actor)[4] = -0.25f;
    (*b.logprobs_actor)[5] = -0.5f;
    (*b.reward)[0] = 1.0f;
    b.origin = std::vector<PromptOrigin>{{1, R"({"answer":4,"id":"a"})"}, {2, "{}"}};
    write_sample_shard(argv[1], b, {.policy_step = 9, .created_by = "example_writer", .config = R"({"seed": 1})"});

    WeightShardMeta meta;
    meta.model_config = R"({"hidden_size": 2, "num_hidden_layers": 1, "vocab_size": 3})";
    meta.layer_end = 1;
    meta.has_embedding = true;
    meta.has_head = true;
    meta.step = 9;
    WeightShardWriter w(argv[2], meta);
    w.add("model.embed_tokens.weight", {3, 2}, std::vector<float>{0, 1, 2, 3, 4, 5});
    w.add("model.norm.weight", {2}, std::vector<float>{1, 1});
    w.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
