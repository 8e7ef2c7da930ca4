// Copies a braid shard with one value made non-finite, for the tests that check
// that every stage refuses NaN/Inf: `io_poison IN OUT NAME [nan|inf]`.
// NAME is a tensor of a weight shard or a float array of a sample shard
// ("advantages", "logprobs/actor", "reward"); its last value becomes NaN (or +Inf).
// The braid writers refuse non-finite values, so this writes the layout of
// docs/formats.md itself through the h5 layer.
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "io/h5.hpp"
#include "io/sample_shard.hpp"
#include "io/shard_header.hpp"
#include "io/weight_shard.hpp"

using namespace braid::io;

namespace {

void poison(std::vector<float>& v, float bad) {
  if (v.empty()) throw std::runtime_error("the array is empty");
  v.back() = bad;
}

void copy_weights(const std::string& in, const std::string& out, const std::string& name, float bad) {
  const WeightShardReader r(in);
  if (!r.contains(name)) throw std::runtime_error("no tensor " + name + " in " + in);
  const WeightShardMeta& m = r.meta();
  auto f = h5::File::create(out, out);
  write_header(f, kWeightsFormat, kWeightsVersion);
  f.set_attr("kind", m.kind);
  f.set_attr("model_config", m.model_config);
  f.set_attr("layer_begin", std::int64_t{m.layer_begin});
  f.set_attr("layer_end", std::int64_t{m.layer_end});
  f.set_attr("has_embedding", std::int64_t{m.has_embedding ? 1 : 0});
  f.set_attr("has_head", std::int64_t{m.has_head ? 1 : 0});
  f.set_attr("tp_rank", std::int64_t{m.tp_rank});
  f.set_attr("tp_size", std::int64_t{m.tp_size});
  f.set_attr("step", m.step);
  f.set_attr("created_by", m.created_by);
  for (const auto& t : r.names()) {
    std::vector<float> v = r.read(t);
    if (t == name) poison(v, bad);
    f.write_tensor(t, r.shape(t), v.data());
  }
  mark_complete(f);
  f.close();
}

void copy_samples(const std::string& in, const std::string& out, const std::string& name, float bad) {
  SampleShard s = read_sample_shard(in);
  SampleBatch& b = s.batch;
  bool found = false;
  if (name == "reward" && b.reward) poison(*b.reward, bad), found = true;
  for (const auto& field : token_array_fields()) {
    if (name == field.path && b.*field.member) poison(*(b.*field.member), bad), found = true;
  }
  if (!found) throw std::runtime_error("no float array " + name + " in " + in);
  auto f = h5::File::create(out, out);
  write_header(f, kSamplesFormat, kSamplesVersion);
  f.set_attr("policy_step", s.meta.policy_step);
  f.set_attr("created_by", s.meta.created_by);
  f.set_attr("config", s.meta.config);
  f.write_1d<std::int32_t>("tokens", b.tokens);
  f.write_1d<std::int64_t>("offsets", b.offsets);
  f.write_1d<std::int32_t>("prompt_len", b.prompt_len);
  f.write_1d<std::int64_t>("sample_id", b.sample_id);
  if (b.reward) f.write_1d<float>("reward", *b.reward);
  for (const auto& field : token_array_fields()) {
    if (const auto& arr = b.*field.member) f.write_1d<float>(field.path, *arr);
  }
  mark_complete(f);
  f.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: io_poison IN OUT NAME [nan|inf]\n");
    return 2;
  }
  const std::string kind = argc == 5 ? argv[4] : "nan";
  const float bad = kind == "inf" ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  try {
    const auto format = h5::File::open_read(argv[1]).attr_string(kAttrFormat).value_or("");
    if (format == std::string(kWeightsFormat)) {
      copy_weights(argv[1], argv[2], argv[3], bad);
    } else {
      copy_samples(argv[1], argv[2], argv[3], bad);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_poison: %s\n", e.what());
    return 1;
  }
  return 0;
}
