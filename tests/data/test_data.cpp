// lib/data: the prompt stream's epochs (every line once per epoch, a seeded shuffle the
// same on every call), the field map of GSM8K- and MATH-shaped lines, the held-out split,
// braid data's files, and the greedy packer under scoring's and training's micro-batches.
#define BOOST_TEST_MODULE data
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "data/fields.hpp"
#include "data/micro_batches.hpp"
#include "data/order.hpp"
#include "data/prepare.hpp"
#include "data/split.hpp"
#include "tests/common/scratch.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

using namespace braid;

BOOST_AUTO_TEST_CASE(every_epoch_takes_every_line_once_in_a_seeded_order) {
  for (const bool shuffle : {false, true}) {
    data::EpochOrder order(7, shuffle, 3);
    // Batches of 3 run across the epochs' boundaries: positions 0..20 are epochs 0, 1, 2.
    std::vector<std::int64_t> taken;
    for (std::int64_t first = 0; first < 21; first += 3) {
      const auto batch = order.lines_at(first, 3);
      taken.insert(taken.end(), batch.begin(), batch.end());
    }
    for (int e = 0; e < 3; ++e) {
      std::vector<std::int64_t> epoch(taken.begin() + 7 * e, taken.begin() + 7 * (e + 1));
      std::sort(epoch.begin(), epoch.end());
      std::vector<std::int64_t> all(7);
      std::iota(all.begin(), all.end(), 0);
      BOOST_TEST(epoch == all, "epoch " << e << (shuffle ? " shuffled" : ""));
      BOOST_TEST(order.epoch_of(7 * e + 6) == e);
    }
    std::vector<std::int64_t> file_order(7);
    std::iota(file_order.begin(), file_order.end(), 0);
    const std::vector<std::int64_t> first(taken.begin(), taken.begin() + 7), second(taken.begin() + 7, taken.begin() + 14);
    if (shuffle) {
      BOOST_TEST(first != file_order);
      BOOST_TEST(first != second);  // each epoch its own order
      data::EpochOrder again(7, true, 3), other(7, true, 4);
      BOOST_TEST(again.lines_at(0, 14) == std::vector<std::int64_t>(taken.begin(), taken.begin() + 14));
      BOOST_TEST(other.lines_at(0, 7) != first);
    } else {
      BOOST_TEST(first == file_order);
      BOOST_TEST(second == file_order);
    }
  }
  BOOST_CHECK_THROW(data::EpochOrder(0, true, 1), std::invalid_argument);
  data::EpochOrder one(1, true, 9);
  BOOST_TEST(one.line_at(5) == 0);
}

BOOST_AUTO_TEST_CASE(field_maps_read_gsm8k_and_math_lines) {
  data::FieldMap gsm;
  BOOST_TEST(!data::add_field(gsm, "prompt=question"));
  std::vector<std::string> problems;
  const json line = json::parse(R"({"question": "Q?", "answer": "2 + 2 = 4\n#### 4", "id": 3})");
  const json mapped = data::map_fields(line, gsm, problems);
  BOOST_TEST(problems.empty());
  BOOST_TEST(mapped["prompt"] == "Q?");
  BOOST_TEST(mapped["answer"] == "2 + 2 = 4\n#### 4");
  BOOST_TEST(mapped["id"] == 3);
  BOOST_TEST(!mapped.contains("question"));

  data::FieldMap math;
  BOOST_TEST(!data::add_field(math, "prompt=problem"));
  BOOST_TEST(!data::add_field(math, "answer=solution"));
  const json m = data::map_fields(json::parse(R"({"problem": "P", "solution": "so \\boxed{\\frac{1}{2}}", "level": 2})"),
                                  math, problems);
  BOOST_TEST(problems.empty());
  BOOST_TEST(m["answer"] == "so \\boxed{\\frac{1}{2}}");
  BOOST_TEST(m["level"] == 2);
  BOOST_TEST(!m.contains("solution"));

  data::map_fields(json::parse(R"({"text": "no question"})"), gsm, problems);
  BOOST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("question: is missing") == 0u, problems[0]);
  problems.clear();
  data::map_fields(json::parse(R"({"question": "Q", "prompt": "P"})"), gsm, problems);
  BOOST_TEST(problems.size() == 1u);  // two prompts: refused, not one silently dropped
  // A mapped value of another type than its reader takes is the line's problem, not passed on:
  // a null or numeric prompt, messages that are not a list, an answer that is an object.
  for (const char* line : {R"({"question": null})", R"({"question": 3})", R"({"question": ""})"}) {
    problems.clear();
    data::map_fields(json::parse(line), gsm, problems);
    BOOST_TEST_REQUIRE(problems.size() == 1u, line);
    BOOST_TEST(problems[0].find("question: is ") == 0u, problems[0]);
  }
  problems.clear();
  data::map_fields(json::parse(R"({"problem": "P", "solution": {"x": 1}})"), math, problems);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("solution: is object, expected a string or a number") == 0u, problems[0]);
  data::FieldMap chat;
  BOOST_TEST(!data::add_field(chat, "messages=conv"));
  problems.clear();
  data::map_fields(json::parse(R"({"conv": "hi"})"), chat, problems);
  BOOST_TEST(problems.size() == 1u);
  problems.clear();

  BOOST_TEST(data::add_field(gsm, "prompt=q2").value_or("").find("twice") != std::string::npos);
  BOOST_TEST(data::add_field(gsm, "question=x").has_value());
  BOOST_TEST(data::add_field(gsm, "answer").has_value());
  BOOST_TEST(data::add_field(gsm, "answer=question").value_or("").find("question is mapped to both prompt and answer") == 0u);

  try {
    data::map_lines("{\"question\": \"a\"}\n\n{\"q\": 1}\n", "p.jsonl", gsm);
    BOOST_ERROR("a line without the mapped key was read");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("p.jsonl:3: question: is missing") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(held_out_split_is_seeded_disjoint_and_whole) {
  const data::Split s = data::split_lines(10, {.count = 3}, 5);
  BOOST_TEST(s.heldout.size() == 3u);
  BOOST_TEST(s.train.size() == 7u);
  std::set<std::int64_t> all(s.train.begin(), s.train.end());
  all.insert(s.heldout.begin(), s.heldout.end());
  BOOST_TEST(all.size() == 10u);
  BOOST_TEST(std::is_sorted(s.heldout.begin(), s.heldout.end()));
  BOOST_TEST(data::split_lines(10, {.count = 3}, 5).heldout == s.heldout);
  BOOST_TEST(data::split_lines(10, {.count = 3}, 6).heldout != s.heldout);
  BOOST_TEST(data::split_lines(10, {.fraction = 0.25}, 5).heldout.size() == 3u);  // 2.5 rounds to 3
  BOOST_TEST(data::split_lines(10, {.fraction = 0.01}, 5).heldout.size() == 1u);  // at least one
  BOOST_TEST(data::split_lines(10, {}, 5).train.size() == 10u);
  BOOST_CHECK_THROW(data::split_lines(3, {.count = 3}, 5), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(braid_data_writes_the_mapped_train_and_heldout_files) {
  const auto dir = braid::test::fresh_scratch("braid_data");
  std::string text;
  for (int i = 0; i < 8; ++i) text += json{{"question", "q" + std::to_string(i)}, {"answer", "#### " + std::to_string(i)}}.dump() + "\n";
  write_text_file((dir / "gsm.jsonl").string(), text);
  const json summary = json::parse(data::prepare_dataset(
      {.input = (dir / "gsm.jsonl").string(), .out_dir = (dir / "out").string(), .fields = {"prompt=question"},
       .heldout = {.count = 2}, .seed = 1}));
  BOOST_TEST(summary["train"]["lines"] == 6);
  BOOST_TEST(summary["heldout"]["lines"] == 2);
  std::set<std::string> prompts;
  for (const char* f : {"train.jsonl", "heldout.jsonl"}) {
    for_each_jsonl_line(read_text_file((dir / "out" / f).string()), 0, [&](std::int64_t, std::string_view line) {
      const json j = json::parse(line);
      BOOST_TEST(j.contains("prompt"));
      BOOST_TEST(!j.contains("question"));
      prompts.insert(j["prompt"].get<std::string>());
    });
  }
  BOOST_TEST(prompts.size() == 8u);
  BOOST_CHECK_THROW(data::prepare_dataset({.input = (dir / "gsm.jsonl").string(), .out_dir = (dir / "o2").string(),
                                           .fields = {"prompt"}, .heldout = {}, .seed = 1}),
                    UsageError);
  BOOST_CHECK_THROW(data::prepare_dataset({.input = (dir / "gsm.jsonl").string(), .out_dir = (dir / "o2").string(),
                                           .fields = {}, .heldout = {.count = 8}, .seed = 1}),
                    UsageError);
}

// The packer scoring and training share: a run closes when the next item would pass the
// size or the item count; an item above the size stands alone.
BOOST_AUTO_TEST_CASE(greedy_runs_close_before_a_limit_and_give_a_large_item_its_own) {
  const std::vector<std::int64_t> sizes{3, 4, 10, 2, 2, 2};
  BOOST_TEST(braid::greedy_runs(sizes, 8) == (std::vector<std::size_t>{2, 3, 6}));
  BOOST_TEST(braid::greedy_runs(sizes, 8, 2) == (std::vector<std::size_t>{2, 3, 5, 6}));
  BOOST_TEST(braid::greedy_runs(sizes, 100) == (std::vector<std::size_t>{6}));
  BOOST_TEST(braid::greedy_runs({}, 8).empty());
}

// A prompt line nested 100,000 deep is a bad line, named (braid data died of a stack
// overflow, SIGSEGV, on it).
BOOST_AUTO_TEST_CASE(a_line_nested_too_deep_is_named) {
  data::FieldMap map;
  BOOST_TEST(!data::add_field(map, "prompt=question"));
  const std::string line = R"({"question": )" + std::string(100000, '[') + std::string(100000, ']') + "}\n";
  try {
    data::map_lines(line, "deep.jsonl", map);
    BOOST_FAIL("a line 100,000 deep was read");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("deep.jsonl:1: line 1, column ") != std::string::npos, what);
    BOOST_TEST(what.find("JSON nested deeper than 512") != std::string::npos, what);
  }
}
