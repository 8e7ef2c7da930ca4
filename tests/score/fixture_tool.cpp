// A helper of the CLI test (not a test itself):
//
//   score_fixture make ACTOR DIR PROMPTS SAMPLES_PER_PROMPT SHARD_SIZE SEED [no-actor-logprobs]
//     writes gen-00000.h5 ... as braid-generate lays them out (shard k holds sample ids
//     [k·SHARD_SIZE, (k+1)·SHARD_SIZE)), with random prompts and responses and
//     logprobs_actor computed by the KV-cache decode path, not by the scoring passes.
//   score_fixture text DIR SPEC.jsonl SAMPLES_PER_PROMPT PROMPTS_FILE
//     writes DIR/gen-00000.h5 with one sample per SPEC line {"prompt", "response", "line",
//     "extra"} (byte tokens: BOS + prompt, response + EOS; logprobs/actor -1), each with
//     its prompt origin when the lines have "extra"; the config names PROMPTS_FILE.
//   score_fixture check ppo|grpo KL_COEF GAMMA LAMBDA SAMPLES SCORED...
//     checks every scored shard's arrays against the formulas, from the stored arrays,
//     and that the shards hold SAMPLES distinct samples; prints the problems, exit 1.
#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/json.hpp"
#include "core/rng.hpp"
#include "io/sample_shard.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace braid;
constexpr std::int32_t kBos = 256, kEos = 257;

std::vector<float> decoded_logprobs(const model::Model& m, const std::vector<std::int32_t>& seq, std::size_t prompt) {
  const int V = m.config().vocab_size;
  auto cache = m.make_kv_cache(1, std::int64_t(seq.size()));
  auto acts = m.make_activations({.max_tokens = std::int64_t(seq.size()), .max_sequences = 1});
  std::vector<float> out(seq.size(), 0.0f);
  std::vector<float> logits(static_cast<std::size_t>(V));
  std::size_t fed = 0;
  for (std::size_t j = prompt; j < seq.size(); ++j) {
    const model::Segment seg{0, std::int64_t(j - fed)};  // the prompt in one prefill, then one token a step
    m.forward_cached(std::span(seq).subspan(fed, j - fed), std::span(&seg, 1), cache, acts);
    fed = j;
    m.backend().copy_to_host(logits.data(), acts.logits(), logits.size() * sizeof(float));
    double mx = logits[0], sum = 0;
    for (float l : logits) mx = std::max(mx, double(l));
    for (float l : logits) sum += std::exp(double(l) - mx);
    out[j] = float(double(logits[std::size_t(seq[j])]) - mx - std::log(sum));
  }
  return out;
}

int make(int argc, char** argv) {
  if (argc < 8) throw std::runtime_error("make ACTOR DIR PROMPTS SAMPLES_PER_PROMPT SHARD_SIZE SEED [no-actor-logprobs]");
  const std::string actor = argv[2];
  const std::filesystem::path dir = argv[3];
  const int prompts = std::stoi(argv[4]), per = std::stoi(argv[5]), shard_size = std::stoi(argv[6]);
  Rng rng(std::stoull(argv[7]));
  const bool no_logprobs = argc > 8 && std::string(argv[8]) == "no-actor-logprobs";
  auto be = backend::make_cpu_backend(1);
  const auto opened = checkpoint::open_model(actor, *be, {}, true, false);
  std::filesystem::create_directories(dir);
  const json config{{"stage", "generate"}, {"samples_per_prompt", per}, {"tokenizer", "byte"}};

  io::SampleBatch batch;
  int shard = 0;
  const int total = prompts * per;
  std::vector<std::int32_t> prompt;
  for (int id = 0; id < total; ++id) {
    if (id % per == 0) {
      prompt.assign(1, kBos);
      for (std::uint64_t k = 0, n = 2 + rng.below(4); k < n; ++k) prompt.push_back(std::int32_t('a' + rng.below(26)));
    }
    std::vector<std::int32_t> seq = prompt;
    const std::uint64_t len = 1 + rng.below(8);
    for (std::uint64_t k = 0; k < len; ++k) {
      seq.push_back(std::int32_t(rng.below(2) ? '0' + rng.below(10) : 'a' + rng.below(26)));
    }
    if (rng.below(2)) seq.push_back(kEos);
    if (!no_logprobs && !batch.logprobs_actor) batch.logprobs_actor = std::vector<float>{};
    batch.add(seq, std::int32_t(prompt.size()), id);
    if (!no_logprobs) {
      const auto lp = decoded_logprobs(*opened.model, seq, prompt.size());
      std::copy(lp.begin(), lp.end(), batch.logprobs_actor->end() - std::ptrdiff_t(lp.size()));
    }
    if ((id + 1) % shard_size == 0 || id + 1 == total) {
      const auto path = dir / fmt::format("gen-{:05d}.h5", shard++);
      io::write_sample_shard(path, batch, {.policy_step = opened.step, .created_by = "score_fixture",
                                           .config = config.dump()});
      std::cout << path.string() << '\n';
      batch = {};
    }
  }
  return 0;
}

int text(int argc, char** argv) {
  if (argc != 6) throw std::runtime_error("text DIR SPEC.jsonl SAMPLES_PER_PROMPT PROMPTS_FILE");
  const std::filesystem::path dir = argv[2];
  std::ifstream in(argv[3]);
  io::SampleBatch b;
  b.logprobs_actor.emplace();
  std::string line;
  for (std::int64_t id = 0; std::getline(in, line); ++id) {
    const json spec = json::parse(line);
    std::vector<std::int32_t> seq{kBos};
    for (unsigned char c : spec["prompt"].get<std::string>()) seq.push_back(c);
    const auto prompt_len = std::int32_t(seq.size());
    for (unsigned char c : spec["response"].get<std::string>()) seq.push_back(c);
    seq.push_back(kEos);
    if (spec.contains("extra") && !b.origin) b.origin.emplace();
    b.add(seq, prompt_len, id);
    for (std::size_t t = b.response_begin(b.size() - 1); t < b.end(b.size() - 1); ++t) (*b.logprobs_actor)[t] = -1.0f;
    if (b.origin) b.origin->back() = {.line = spec.value("line", 0), .extra = spec.value("extra", json::object()).dump()};
  }
  std::filesystem::create_directories(dir);
  const json config{{"stage", "generate"}, {"samples_per_prompt", std::stoi(argv[4])}, {"prompts", argv[5]}};
  const auto path = dir / "gen-00000.h5";
  io::write_sample_shard(path, b, {.created_by = "score_fixture", .config = config.dump()});
  std::cout << path.string() << '\n';
  return 0;
}

struct Problems {
  std::vector<std::string> list;
  void add(std::string s) {
    if (list.size() < 20) std::cerr << "FAIL: " << s << '\n';
    list.push_back(std::move(s));
  }
};

bool near(double a, double b, double tol) { return std::abs(a - b) <= tol * (1 + std::abs(b)); }

int check(int argc, char** argv) {
  if (argc < 8) throw std::runtime_error("check ppo|grpo KL_COEF GAMMA LAMBDA SAMPLES SCORED...");
  const bool ppo = std::string(argv[2]) == "ppo";
  const double kl = std::stod(argv[3]), gamma = std::stod(argv[4]), lambda = std::stod(argv[5]);
  const std::int64_t samples = std::stoll(argv[6]);
  Problems p;
  std::set<std::int64_t> ids;
  std::map<std::int64_t, std::vector<double>> group_adv;
  std::int64_t per = 0;
  for (int a = 7; a < argc; ++a) {
    const std::string file = argv[a];
    const io::SampleShard s = io::read_sample_shard(file);
    const io::SampleBatch& b = s.batch;
    const json cfg = json::parse(s.meta.config);
    if (!cfg.contains("generate") || !cfg.contains("score")) p.add(file + ": config lacks generate or score");
    per = cfg["generate"].value("samples_per_prompt", 0);
    const bool have = b.logprobs_actor && b.logprobs_ref && b.reward && b.advantages && b.returns;
    if (!have) { p.add(file + ": an array is missing"); continue; }
    if (ppo != b.values.has_value()) p.add(file + (ppo ? ": PPO without /values" : ": GRPO with /values"));
    for (std::size_t i = 0; i < b.size(); ++i) {
      ids.insert(b.sample_id[i]);
      for (std::size_t t = b.begin(i); t < b.response_begin(i); ++t) {
        for (const auto& f : io::token_array_fields()) {
          const auto& arr = b.*f.member;
          if (arr && (*arr)[t] != 0.0f) p.add(fmt::format("{}: /{} is {} at prompt token {}", file, f.path, (*arr)[t], t));
        }
      }
      const auto actor = b.response_of(*b.logprobs_actor, i), ref = b.response_of(*b.logprobs_ref, i);
      const auto adv = b.response_of(*b.advantages, i), ret = b.response_of(*b.returns, i);
      const std::size_t n = actor.size();
      for (std::size_t t = 0; t < n; ++t) {
        // The reference is the actor's checkpoint: the full-sequence pass must agree with the decode path.
        if (!near(ref[t], actor[t], 1e-3)) p.add(fmt::format("{}: seq {} token {}: ref {} vs actor {}", file, i, t, ref[t], actor[t]));
        if (!(ref[t] < 0)) p.add(fmt::format("{}: seq {} token {}: logprob_ref {} is not negative", file, i, t, ref[t]));
      }
      if (ppo) {
        const auto v = b.response_of(*b.values, i);
        std::vector<double> delta(n);
        for (std::size_t t = 0; t < n; ++t) {
          const double r = -kl * (double(actor[t]) - double(ref[t])) + (t + 1 == n ? (*b.reward)[i] : 0.0);
          delta[t] = r + gamma * (t + 1 < n ? v[t + 1] : 0.0) - v[t];
        }
        for (std::size_t t = 0; t < n; ++t) {
          double want = 0;
          for (std::size_t l = 0; t + l < n; ++l) want += std::pow(gamma * lambda, double(l)) * delta[t + l];
          if (!near(adv[t], want, 1e-4)) p.add(fmt::format("{}: seq {} token {}: advantage {} vs {}", file, i, t, adv[t], want));
          if (!near(ret[t], want + v[t], 1e-4)) p.add(fmt::format("{}: seq {} token {}: return {} vs {}", file, i, t, ret[t], want + v[t]));
        }
      } else {
        for (std::size_t t = 0; t < n; ++t) {
          if (adv[t] != adv[0] || ret[t] != adv[t]) p.add(fmt::format("{}: seq {}: GRPO advantage varies", file, i));
        }
        if (n > 0 && per > 0) group_adv[b.sample_id[i] / per].push_back(adv[0]);
      }
    }
  }
  if (std::int64_t(ids.size()) != samples) p.add(fmt::format("{} distinct samples, expected {}", ids.size(), samples));
  for (const auto& [g, adv] : group_adv) {
    double sum = 0;
    for (double a : adv) sum += a;
    if (adv.size() == std::size_t(per) && std::abs(sum) > 1e-4) p.add(fmt::format("group {}: advantages sum to {}", g, sum));
  }
  if (!p.list.empty()) return 1;
  std::cout << "ok " << (argc - 7) << " shards\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string verb = argc > 1 ? argv[1] : "";
    if (verb == "make") return make(argc, argv);
    if (verb == "check") return check(argc, argv);
    if (verb == "text") return text(argc, argv);
    std::cerr << "usage: score_fixture make|text|check ...\n";
  } catch (const std::exception& e) {
    std::cerr << "score_fixture: " << e.what() << '\n';
  }
  return 1;
}
