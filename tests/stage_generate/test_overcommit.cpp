// braid-generate --overcommit over several iterations (the built tool, run as braid run
// runs it), each with a new policy: what is deferred is resumed, not regenerated (its
// tokens, logprobs and policy steps kept), no sample is lost or put in two batches, each
// batch is B whole groups, and a rerun of an iteration makes the same batch.
#define BOOST_TEST_MODULE generate_overcommit
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/json.hpp"
#include "generate/deferred.hpp"
#include "io/sample_shard.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using braid::gen::Deferred;
using braid::gen::DeferredSample;

namespace {

constexpr int kSpp = 2;           // samples per prompt: a group
constexpr int kIterations = 3;
const std::vector<std::string> kTexts{"a", "count: 1 2 3", "hello there", "x", "2+2=", "Why?"};
constexpr std::int64_t kBatchGroups = 6;  // one group per prompt line

// One "policy" per iteration: actor-1.h5 at step 1, actor-2.h5 at step 2, ... with other
// weights each time (the new policy a deferred sample is resumed under).
const fs::path& root() {
  static const fs::path dir = [] {
    const fs::path d = braid::test::fresh_scratch("overcommit");
    auto be = braid::backend::make_cpu_backend(1);
    for (int i = 1; i <= kIterations; ++i) {
      braid::model::Model m(braid::test::tiny_text_config(), {}, *be);
      // Far from uniform (std 0.3); sampled at temperature 2, the EOS comes after a few
      // dozen tokens or after 200: a long tail.
      m.init_random(10 + static_cast<std::uint64_t>(i), 0.3);
      braid::checkpoint::save_weights(m, d / fmt::format("actor-{}.h5", i), {.step = i});
    }
    std::ofstream p(d / "prompts.jsonl");
    for (const auto& t : kTexts) p << braid::json{{"text", t}}.dump() << "\n";
    return d;
  }();
  return dir;
}

std::string bin(const std::string& tool) { return braid::test::tool(tool).string(); }

fs::path out_dir(int i) { return root() / fmt::format("it{}", i); }
fs::path deferred_of(int i) { return out_dir(i) / "deferred.h5"; }

// Iteration i: actor-i, resuming iteration i-1's deferred file.
int generate(int i, const std::string& extra = "") {
  const fs::path d = root();
  const std::string resume = i > 1 ? "--resume-deferred " + deferred_of(i - 1).string() : "";
  const std::string cmd = fmt::format(
      "{} -q --actor {} --prompts {} -o {} --samples-per-prompt {} --shard-size 5 --max-new-tokens 200 --seed 7 "
      "--temperature 2 --threads 1 --overcommit 3 --deferred-out {} {} {} > {} 2> {}",
      bin("braid-generate"), (d / fmt::format("actor-{}.h5", i)).string(), (d / "prompts.jsonl").string(),
      out_dir(i).string(), kSpp, deferred_of(i).string(), resume, extra, (d / fmt::format("it{}.stdout", i)).string(),
      (d / fmt::format("it{}.stderr", i)).string());
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Trained {
  std::vector<std::int32_t> response;
  std::vector<float> logprobs;
  std::vector<std::int64_t> steps;
};

// The batch of iteration i, by sample id.
std::map<std::int64_t, Trained> batch_of(int i) {
  std::map<std::int64_t, Trained> out;
  for (const auto& e : fs::directory_iterator(out_dir(i))) {
    if (e.path().filename().string().rfind("gen-", 0) != 0) continue;
    const auto shard = braid::io::read_sample_shard(e.path());
    const auto& b = shard.batch;
    BOOST_TEST_REQUIRE(b.policy_step.has_value());
    BOOST_TEST(shard.meta.policy_step == i);
    for (std::size_t k = 0; k < b.size(); ++k) {
      const auto lp = b.response_of(*b.logprobs_actor, k);
      Trained t{{b.response(k).begin(), b.response(k).end()}, {lp.begin(), lp.end()}, {}};
      t.steps.assign(b.policy_step->begin() + static_cast<std::ptrdiff_t>(b.response_begin(k)),
                     b.policy_step->begin() + static_cast<std::ptrdiff_t>(b.end(k)));
      BOOST_TEST_REQUIRE(out.emplace(b.sample_id[k], std::move(t)).second);
    }
  }
  return out;
}

struct Run {
  std::vector<std::map<std::int64_t, Trained>> batches;  // [i-1]
  std::vector<Deferred> deferred;                        // [i-1]
};

const Run& three_iterations() {
  static const Run run = [] {
    Run r;
    for (int i = 1; i <= kIterations; ++i) {
      BOOST_TEST_REQUIRE(generate(i) == 0);
      r.batches.push_back(batch_of(i));
      r.deferred.push_back(braid::gen::read_deferred(deferred_of(i)));
    }
    return r;
  }();
  return run;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_batch_is_b_whole_groups_of_this_policy_or_resumed) {
  const Run& r = three_iterations();
  for (int i = 1; i <= kIterations; ++i) {
    const auto& batch = r.batches[static_cast<std::size_t>(i - 1)];
    std::map<std::int64_t, int> groups;
    for (const auto& [id, t] : batch) {
      ++groups[id / kSpp];
      for (auto s : t.steps) BOOST_TEST((s >= 1 && s <= i));
    }
    BOOST_TEST(static_cast<std::int64_t>(groups.size()) == kBatchGroups);
    for (const auto& [g, n] : groups) BOOST_TEST(n == kSpp, "group " << g << " of iteration " << i);
  }
}

BOOST_AUTO_TEST_CASE(no_sample_is_lost_or_in_two_batches) {
  const Run& r = three_iterations();
  std::set<std::int64_t> seen;
  for (const auto& batch : r.batches) {
    for (const auto& [id, _] : batch) BOOST_TEST(seen.insert(id).second, "sample " << id << " in two batches");
  }
  const Deferred& last = r.deferred.back();
  for (const DeferredSample& s : last.samples) {
    const auto id = static_cast<std::int64_t>(s.prompt.sample_id);
    BOOST_TEST(seen.insert(id).second, "deferred sample " << id << " was also trained");
  }
  // Every sample started so far is in a batch or still deferred: ids 0 .. next_prompt x spp.
  BOOST_TEST(static_cast<std::int64_t>(seen.size()) == last.next_prompt * kSpp);
  BOOST_TEST(*seen.begin() == 0);
  BOOST_TEST(*seen.rbegin() == last.next_prompt * kSpp - 1);
  // Overcommit 3 over a batch of 6: more started than trained, the rest carried.
  BOOST_TEST(last.next_prompt > kIterations * kBatchGroups);
}

BOOST_AUTO_TEST_CASE(deferred_samples_are_resumed_not_regenerated) {
  const Run& r = three_iterations();
  int resumed_partial = 0, mixed = 0;
  for (int i = 1; i < kIterations; ++i) {
    const auto& next_batch = r.batches[static_cast<std::size_t>(i)];
    std::map<std::int64_t, const DeferredSample*> next_deferred;
    for (const auto& s : r.deferred[static_cast<std::size_t>(i)].samples) {
      next_deferred[static_cast<std::int64_t>(s.prompt.sample_id)] = &s;
    }
    for (const DeferredSample& s : r.deferred[static_cast<std::size_t>(i - 1)].samples) {
      const auto id = static_cast<std::int64_t>(s.prompt.sample_id);
      const std::size_t kept = s.prompt.response.size();
      for (auto step : s.policy_steps) BOOST_TEST(step <= i);
      // Where it is after iteration i+1: in its batch, or deferred again.
      std::vector<std::int32_t> response;
      std::vector<float> logprobs;
      std::vector<std::int64_t> steps;
      if (auto it = next_batch.find(id); it != next_batch.end()) {
        response = it->second.response, logprobs = it->second.logprobs, steps = it->second.steps;
      } else {
        BOOST_TEST_REQUIRE(next_deferred.count(id) == 1u, "deferred sample " << id << " vanished");
        const DeferredSample& again = *next_deferred.at(id);
        response = again.prompt.response, logprobs = again.prompt.raw_logprobs, steps = again.policy_steps;
      }
      BOOST_TEST_REQUIRE(response.size() >= kept);
      // The partial tokens, their logprobs and their policy steps are kept as they were.
      BOOST_TEST(std::equal(s.prompt.response.begin(), s.prompt.response.end(), response.begin()),
                 "sample " << id << "'s partial response was regenerated");
      BOOST_TEST(std::equal(s.prompt.raw_logprobs.begin(), s.prompt.raw_logprobs.end(), logprobs.begin()));
      BOOST_TEST(std::equal(s.policy_steps.begin(), s.policy_steps.end(), steps.begin()));
      if (s.finished) {
        BOOST_TEST(response.size() == kept, "finished sample " << id << " was continued");
        continue;
      }
      // What came after was sampled by iteration i+1's actor.
      for (std::size_t t = kept; t < steps.size(); ++t) BOOST_TEST(steps[t] == i + 1);
      if (kept > 0) ++resumed_partial;
      if (kept > 0 && response.size() > kept) ++mixed;
    }
  }
  // The settings make a long tail: some samples were stopped mid-response and resumed
  // under a newer policy, holding tokens of two policy steps.
  BOOST_TEST(resumed_partial > 0);
  BOOST_TEST(mixed > 0);
}

BOOST_AUTO_TEST_CASE(a_rerun_of_an_iteration_makes_the_same_batch) {
  const Run& r = three_iterations();
  // As after an interruption: the earlier attempt's shards are there; they are made again.
  BOOST_TEST_REQUIRE(generate(2) == 0);
  const auto again = batch_of(2);
  BOOST_TEST_REQUIRE(again.size() == r.batches[1].size());
  for (const auto& [id, t] : r.batches[1]) {
    BOOST_TEST_REQUIRE(again.count(id) == 1u);
    BOOST_TEST(again.at(id).response == t.response, boost::test_tools::per_element());
    BOOST_TEST(again.at(id).steps == t.steps, boost::test_tools::per_element());
  }
  const Deferred d = braid::gen::read_deferred(deferred_of(2));
  BOOST_TEST(d.next_prompt == r.deferred[1].next_prompt);
  BOOST_TEST(d.samples.size() == r.deferred[1].samples.size());
}

BOOST_AUTO_TEST_CASE(a_deferred_file_of_other_settings_is_refused) {
  three_iterations();
  const std::string err = (root() / "it2.stderr").string();
  BOOST_TEST(generate(2, "--top-k 5") == 2);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find("deferred.h5") != std::string::npos);
  BOOST_TEST(text.find("config.top_k") != std::string::npos);
  BOOST_TEST(generate(2) == 0);  // and the folder is fine again
}
