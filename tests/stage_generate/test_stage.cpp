// braid-generate end to end (the built tool, run as a user would): what its shards
// hold, resumption, and mpirun with and without migration, compared sample by sample
// with a direct Generator run.
#define BOOST_TEST_MODULE generate_stage
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/json.hpp"
#include "generate/generate.hpp"
#include "io/sample_shard.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using braid::io::SampleBatch;

namespace {

// Text prompts of different lengths; the byte tokenizer makes them BOS + bytes.
const std::vector<std::string> kTexts{"a", "count: 1 2 3", "hello there", "x", "The quick brown fox",
                                      "2+2=", "ok", "lorem ipsum dolor", "zz", "Why?"};

struct Record {
  std::vector<std::int32_t> prompt, response;
  std::vector<float> logprobs;  // per response token
};
using Samples = std::map<std::int64_t, Record>;

const fs::path& root() {
  static const fs::path dir = [] {
    const fs::path d = braid::test::fresh_scratch("stage");
    // An actor whose distributions are far from uniform (std 0.3), so that some
    // samples stop at EOS and responses differ in length.
    auto be = braid::backend::make_cpu_backend(1);
    braid::model::Model m(braid::test::tiny_text_config(), {}, *be);
    m.init_random(11, 0.3);
    braid::checkpoint::save_weights(m, d / "actor.h5", {.step = 4});
    std::ofstream p(d / "prompts.jsonl");
    for (const auto& t : kTexts) p << braid::json{{"text", t}}.dump() << "\n";
    return d;
  }();
  return dir;
}

std::string bin(const std::string& tool) { return braid::test::tool(tool).string(); }

// Runs braid-generate (under `launcher`, e.g. "mpirun -np 3") into root()/out; returns
// the exit code, with stdout's lines in *lines.
int generate(const std::string& out, const std::string& args, std::vector<std::string>* lines = nullptr,
             const std::string& launcher = "") {
  const fs::path d = root();
  const std::string cmd = fmt::format(
      "{} {} -q --actor {} --prompts {} -o {} --samples-per-prompt 2 --shard-size 3 --max-new-tokens 40 "
      "--seed 7 --top-p 0.95 --threads 1 {} > {} 2> {}",
      launcher, bin("braid-generate"), (d / "actor.h5").string(), (d / "prompts.jsonl").string(), (d / out).string(),
      args, (d / (out + ".stdout")).string(), (d / (out + ".stderr")).string());
  const int status = std::system(cmd.c_str());
  if (lines) {
    lines->clear();
    std::ifstream in(d / (out + ".stdout"));
    for (std::string l; std::getline(in, l);) lines->push_back(l);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Samples read_dir(const std::string& out) {
  Samples all;
  for (const auto& e : fs::directory_iterator(root() / out)) {
    const SampleBatch b = braid::io::read_sample_shard(e.path()).batch;
    for (std::size_t i = 0; i < b.size(); ++i) {
      auto lp = b.response_of(*b.logprobs_actor, i);
      all[b.sample_id[i]] = {{b.prompt(i).begin(), b.prompt(i).end()},
                             {b.response(i).begin(), b.response(i).end()},
                             {lp.begin(), lp.end()}};
    }
  }
  return all;
}

// Same ids, prompts and tokens; logprobs within a relative tol (0: bitwise).
void check_same(const Samples& a, const Samples& b, float tol) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  for (const auto& [id, x] : a) {
    BOOST_TEST_REQUIRE(b.count(id) == 1u);
    const Record& y = b.at(id);
    BOOST_TEST(x.prompt == y.prompt, boost::test_tools::per_element());
    BOOST_TEST(x.response == y.response, boost::test_tools::per_element());
    if (tol == 0) BOOST_TEST(x.logprobs == y.logprobs, boost::test_tools::per_element());
    else BOOST_TEST(x.logprobs == y.logprobs, boost::test_tools::tolerance(tol) << boost::test_tools::per_element());
  }
}

bool have_mpirun() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

}  // namespace

BOOST_AUTO_TEST_CASE(shards_hold_the_samples_of_a_direct_generator_run) {
  std::vector<std::string> lines;
  BOOST_TEST_REQUIRE(generate("one", "--max-batch 4 --stats " + (root() / "one.json").string(), &lines) == 0);
  // 10 prompts x 2 = 20 samples in shards of 3: 7 files, each printed once.
  BOOST_TEST_REQUIRE(lines.size() == 7u);
  std::set<std::string> printed(lines.begin(), lines.end());
  for (int k = 0; k < 7; ++k) BOOST_TEST(printed.count((root() / "one" / fmt::format("gen-{:05}.h5", k)).string()) == 1u);

  // The same prompts, options and model straight through the Generator.
  auto be = braid::backend::make_cpu_backend(1);
  auto actor = braid::checkpoint::open_model(root() / "actor.h5", *be, {}, true);
  std::vector<braid::gen::Prompt> prompts;
  for (const auto& t : kTexts) {
    for (int k = 0; k < 2; ++k) {
      braid::gen::Prompt p{.sample_id = prompts.size(), .tokens = {256}};
      for (unsigned char c : t) p.tokens.push_back(c);
      prompts.push_back(p);
    }
  }
  const auto direct = braid::gen::generate(
      *actor.model, prompts,
      {.sampling = {.temperature = 1.0, .top_p = 0.95, .seed = 7}, .max_batch = 4, .max_new_tokens = 40, .stop_tokens = {257}});

  std::int64_t tokens = 0, response_tokens = 0;
  int stopped = 0;
  for (int k = 0; k < 7; ++k) {
    const auto shard = braid::io::read_sample_shard(root() / "one" / fmt::format("gen-{:05}.h5", k));
    BOOST_TEST(shard.meta.policy_step == 4);
    const auto config = braid::json::parse(shard.meta.config);
    BOOST_TEST(config["stage"] == "generate");
    BOOST_TEST(config["samples_per_prompt"] == 2);
    const SampleBatch& b = shard.batch;
    BOOST_TEST_REQUIRE(b.size() == (k < 6 ? 3u : 2u));
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto id = b.sample_id[i];
      BOOST_TEST(id == 3 * k + static_cast<std::int64_t>(i));  // fixed blocks of ids, in order
      const auto& d = direct[static_cast<std::size_t>(id)];
      BOOST_TEST(b.prompt_len[i] == static_cast<std::int32_t>(kTexts[static_cast<std::size_t>(id / 2)].size() + 1));
      const auto prompt = b.prompt(i);
      const auto response = b.response(i);
      BOOST_TEST(std::vector<std::int32_t>(prompt.begin(), prompt.end()) == d.prompt, boost::test_tools::per_element());
      BOOST_TEST(std::vector<std::int32_t>(response.begin(), response.end()) == d.response,
                 boost::test_tools::per_element());
      // logprobs/actor: the raw (temperature 1) logprob of each response token, 0 on the prompt.
      const auto lp = b.response_of(*b.logprobs_actor, i);
      BOOST_TEST(std::vector<float>(lp.begin(), lp.end()) == d.raw_logprobs, boost::test_tools::per_element());
      for (std::size_t t = b.begin(i); t < b.response_begin(i); ++t) BOOST_TEST((*b.logprobs_actor)[t] == 0.0f);
      tokens += static_cast<std::int64_t>(b.length(i));
      response_tokens += static_cast<std::int64_t>(b.response_length(i));
      stopped += d.finish == braid::gen::FinishReason::stop;
    }
  }
  BOOST_TEST(stopped >= 2);   // meaningful only if lengths differ:
  BOOST_TEST(stopped <= 18);  // some samples stopped at EOS, some ran to the cap

  const auto stats = braid::load_json_file((root() / "one.json").string());
  BOOST_TEST(stats["format"] == "braid.stagestats");
  BOOST_TEST(stats["stage"] == "generate");
  BOOST_TEST(stats["sequences"] == 20);
  BOOST_TEST(stats["tokens"] == tokens);
  const auto& call = stats["calls"]["actor_gen"];
  BOOST_TEST(call["response_tokens"] == response_tokens);
  BOOST_TEST(call["steps"].get<std::int64_t>() > 40);
  BOOST_TEST(call["prefill_seconds"].get<double>() > 0);
  BOOST_TEST(call["decode_seconds"].get<double>() > 0);
  BOOST_TEST(call["seconds"].get<double>() <= stats["wall_seconds"].get<double>());
}

BOOST_AUTO_TEST_CASE(a_rerun_regenerates_only_the_missing_shard) {
  // One sequence at a time: every sample is computed alone, so a rerun is bitwise the same.
  for (const std::string batch : {"1", "4"}) {
    const std::string out = "resume" + batch;
    std::vector<std::string> first, lines;
    BOOST_TEST_REQUIRE(generate(out, "--max-batch " + batch, &first) == 0);
    const Samples before = read_dir(out);
    const fs::path gone = root() / out / "gen-00002.h5";
    std::map<fs::path, fs::file_time_type> written;
    for (const auto& e : fs::directory_iterator(root() / out)) written[e.path()] = fs::last_write_time(e.path());
    fs::remove(gone);
    BOOST_TEST_REQUIRE(generate(out, "--max-batch " + batch, &lines) == 0);
    // Every shard is printed again (the skipped ones first), so a consumer in the pipe
    // sees them all; only the missing one is written.
    std::sort(first.begin(), first.end());
    BOOST_TEST_REQUIRE(!lines.empty());
    BOOST_TEST(lines.back() == gone.string());
    std::sort(lines.begin(), lines.end());
    BOOST_TEST(lines == first, boost::test_tools::per_element());
    for (const auto& [path, time] : written) {
      if (path != gone) BOOST_TEST((fs::last_write_time(path) == time), path << " was rewritten");
    }
    // With batches the shard's samples share steps with other ones than the first time,
    // and OpenBLAS rounds a row differently with the rows around it: tokens stay the
    // same, logprobs agree to about 1e-5 (docs/tools/generate.md).
    check_same(before, read_dir(out), batch == "1" ? 0.0f : 1e-4f);
  }
}

BOOST_AUTO_TEST_CASE(mpirun_ranks_give_the_samples_of_one_process_with_and_without_migration) {
  if (!have_mpirun()) {
    BOOST_TEST_MESSAGE("no mpirun: skipped");
    return;
  }
  BOOST_TEST_REQUIRE(generate("single", "--max-batch 4") == 0);
  const Samples single = read_dir("single");

  std::vector<std::string> lines;
  BOOST_TEST_REQUIRE(generate("np3", "--max-batch 4", &lines, "mpirun -np 3") == 0);
  check_same(single, read_dir("np3"), 1e-4f);
  // Every stdout line a whole path (ranks never interleave mid-line), each shard once.
  BOOST_TEST(lines.size() == 7u);
  for (const auto& l : lines) BOOST_TEST(fs::exists(l), "not a shard path: '" << l << "'");
  BOOST_TEST(std::set<std::string>(lines.begin(), lines.end()).size() == 7u);

  const std::string stats = (root() / "mig.json").string();
  BOOST_TEST_REQUIRE(generate("mig", "--max-batch 4 --migrate-threshold 0.6 --stats " + stats, &lines,
                              "mpirun -np 3") == 0);
  check_same(single, read_dir("mig"), 1e-4f);
  BOOST_TEST(lines.size() == 7u);
  const auto doc = braid::load_json_file(stats);
  const auto& mig = doc["migration"];
  BOOST_TEST_REQUIRE(mig.is_object());
  BOOST_TEST(mig["remaining"].get<std::int64_t>() < 12);
  BOOST_TEST(mig["receivers"].size() == 1u);
  BOOST_TEST(mig["moved_samples"].get<std::int64_t>() > 0);
  BOOST_TEST(mig["moved_partial"].get<std::int64_t>() > 0);  // continued mid-response
  BOOST_TEST(doc["sequences"] == 20);
  int handed = 0;
  for (const auto& r : doc["ranks"]) handed += r["role"] == "handed over";
  BOOST_TEST(handed == 2);
  BOOST_TEST(text_of(root() / "mig.stderr").empty());  // -q: nothing but errors
}
