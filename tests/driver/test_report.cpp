// The run's report (lib/driver/report): report.json from the iterations' metrics, eval
// and ablation files; report.svg well-formed, deterministic, with a chart per series, the
// schedule drawn by braid-schedgen's own code, and the ablation when there is one.
#define BOOST_TEST_MODULE driver_report
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <utility>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "driver/report.hpp"
#include "sched/baselines.hpp"
#include "sched/lower.hpp"
#include "sched/problem.hpp"
#include "sched/schedule.hpp"
#include "sched/schedule_json.hpp"
#include "sched/svg.hpp"
#include "tests/common/scratch.hpp"
#include "tests/driver/run_files.hpp"

using namespace braid;
using namespace braid::driver;
namespace fs = std::filesystem;

namespace {

// Well-formed XML, as far as an SVG writer can get it wrong: every tag closed in order,
// attributes quoted, no stray '<' or '&' in text. Returns the problem, or "".
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const auto semi = s.find(';', i);
      if (semi == std::string::npos || semi - i > 6) return "a bare & at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      if (s[i] == '>') return "a bare > at " + std::to_string(i);
      ++i;
      continue;
    }
    const auto end = s.find('>', i);
    if (end == std::string::npos) return "an unclosed tag at " + std::to_string(i);
    std::string tag = s.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "a '<' inside a tag at " + std::to_string(i);
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "an unbalanced quote in <" + tag + ">";
    if (tag.starts_with("/")) {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else if (!tag.ends_with("/")) {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end + 1;
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

// The y and height attributes of the <rect> whose <title> starts with `title`.
std::pair<double, double> rect_of(const std::string& svg, const std::string& title) {
  const auto t = svg.find("<title>" + title);
  BOOST_REQUIRE(t != std::string::npos);
  const auto open = svg.rfind("<rect", t);
  auto attr = [&](const char* name) {
    const auto at = svg.find(std::string(" ") + name + "=\"", open);
    BOOST_REQUIRE(at != std::string::npos && at < t);
    return std::atof(svg.c_str() + at + std::strlen(name) + 3);
  };
  return {attr("y"), attr("height")};
}

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A run folder holding three iterations' metrics, evaluations of 0, 2 and 3, and an ablation.
fs::path fake_run() {
  const fs::path run = test::run_folder("report", test::kGoodPpoRun);
  const fs::path out = run.parent_path() / "out";
  const Layout layout(out);
  for (int i = 1; i <= 3; ++i) {
    test::write_file(layout.iteration_metrics(i),
                     fmt::format(R"({{"iteration": {0}, "mean_reward": {1}, "mean_response_length": {2}, "kl": {3},
                                  "seconds": {{"generate": 1.5, "score": 0.5, "train": {4}}},
                                  "train": {{"actor_train.entropy": {5}}}{6}}})",
                                 i, 0.1 * i, 10 - i, 0.01 * i, 2.0 + i, 1.0 / i,
                                 i == 3 ? R"(, "rollout": "fused")" : ""));
  }
  for (int i : {0, 2, 3}) {
    test::write_file(layout.eval_file(i), fmt::format(R"({{"format": "braid.eval", "accuracy": {}, "pass@4": {}, "seconds": 0.25}})",
                                                      0.2 * (i + 1), 0.3 * (i + 1) > 1 ? 1.0 : 0.3 * (i + 1)));
  }
  test::write_file(layout.ablation_file(2), R"({"format": "braid.ablation", "version": 1, "iteration": 2,
    "settings": {"ranks": 2}, "prediction": {"tool": "braid-meshplan"},
    "variants": [{"name": "serial", "fusions": [], "measured": {"generate": 3, "score": 2, "train": 5, "total": 10},
                  "predicted": {"total": 9}},
                 {"name": "inter-stage fusion", "fusions": ["inter_stage"],
                  "measured": {"generate": 3, "score": 0.5, "train": 5, "total": 8.5}, "predicted": {"total": 8}}]})");
  return run;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_report_gathers_every_iteration) {
  const fs::path run = fake_run();
  RunSpec spec = load_run_file(run);
  spec.iterations = 3;
  spec.eval = EvalSpec{.policy = {.prompts = "heldout.jsonl", .reward_rule = "math", .samples = 4}};
  const Layout layout(run.parent_path() / "out");
  const ordered_json r = build_report(spec, layout, 3);
  BOOST_TEST(r["format"].get<std::string>() == kReportFormat);
  const auto& rows = r["iterations"];
  BOOST_REQUIRE_EQUAL(rows.size(), 4u);  // the start (evaluated) and iterations 1..3
  BOOST_TEST(rows[0]["iteration"].get<int>() == 0);
  BOOST_TEST(rows[0]["mean_reward"].is_null());
  BOOST_TEST(rows[0]["heldout_accuracy"].get<double>() == 0.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[1]["heldout_accuracy"].is_null());  // iteration 1 was not evaluated
  BOOST_TEST(rows[3]["heldout_accuracy"].get<double>() == 0.8, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[3]["heldout_pass_at_n"].get<double>() == 1.0);
  BOOST_TEST(rows[2]["mean_reward"].get<double>() == 0.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[2]["kl"].get<double>() == 0.02, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[2]["entropy"].get<double>() == 0.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[2]["mean_response_length"].get<double>() == 8.0);
  BOOST_TEST(rows[2]["seconds"]["train"].get<double>() == 4.0);
  BOOST_TEST(rows[2]["seconds"]["eval"].get<double>() == 0.25);
  BOOST_REQUIRE(r.contains("ablation"));
  BOOST_TEST(r["ablation"][0]["variants"][1]["measured"]["score"].get<double>() == 0.5);
  BOOST_TEST(r["heldout"]["samples_per_prompt"].get<int>() == 4);
}

BOOST_AUTO_TEST_CASE(the_picture_is_well_formed_deterministic_and_holds_every_series) {
  const fs::path run = fake_run();
  RunSpec spec = load_run_file(run);
  spec.eval = EvalSpec{.policy = {.prompts = "heldout.jsonl", .reward_rule = "math"}};
  const Layout layout(run.parent_path() / "out");
  const ordered_json r = build_report(spec, layout, 3);
  const std::string svg = report_svg(r);
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(svg == report_svg(r));
  for (const char* key : {"mean_reward", "heldout_accuracy", "kl", "mean_response_length", "entropy"}) {
    BOOST_TEST_CONTEXT(key) {
      BOOST_TEST(count_of(svg, fmt::format("id=\"chart-{}\"", key)) == 1);
      BOOST_TEST(count_of(svg, fmt::format("data-series=\"{}\"", key)) == 1);
    }
  }
  // Three points of reward, three of accuracy (iterations 0, 2, 3): one circle each.
  BOOST_TEST(count_of(svg, "<title>iteration 0: 0.2</title>") == 1);
  // Stage bars: generate, score and train of 3 iterations, eval of 3.
  BOOST_TEST(count_of(svg, "class=\"stage-train\"") == 3);
  BOOST_TEST(count_of(svg, "class=\"stage-eval\"") == 3);
  // Iteration 3's rollout was fused: its score is drawn inside generate (nested), and
  // train sits directly on generate; iteration 2's train sits on its score.
  BOOST_TEST(count_of(svg, "class=\"stage-score\"") == 2);
  BOOST_TEST(count_of(svg, "class=\"stage-score nested\"") == 1);
  const auto [g3y, g3h] = rect_of(svg, "iteration 3 generate");
  const auto [t3y, t3h] = rect_of(svg, "iteration 3 train");
  const auto [s3y, s3h] = rect_of(svg, "iteration 3 score");
  BOOST_TEST(t3y + t3h == g3y, boost::test_tools::tolerance(0.01));
  BOOST_TEST(s3y == g3y, boost::test_tools::tolerance(0.01));        // the top of generate
  BOOST_TEST(s3h == g3h / 3, boost::test_tools::tolerance(0.01));    // 0.5 s of 1.5 s
  const auto [s2y, s2h] = rect_of(svg, "iteration 2 score");
  const auto [t2y, t2h] = rect_of(svg, "iteration 2 train");
  BOOST_TEST(t2y + t2h == s2y, boost::test_tools::tolerance(0.01));
  BOOST_TEST(count_of(svg, "id=\"ablation-2\"") == 1);
  BOOST_TEST(count_of(svg, "class=\"predicted\"") == 2);
  BOOST_TEST(count_of(svg, "class=\"measured stage-score\"") == 2);
  BOOST_TEST(count_of(svg, "id=\"schedule\"") == 0);
}

BOOST_AUTO_TEST_CASE(the_schedule_is_drawn_by_schedgen_code_from_its_file) {
  const std::string spec_text = R"({"format": "braid.schedspec", "version": 1, "devices": 2,
    "models": [{"name": "actor", "stages": 2, "micro_batches": 4, "fwd": 1, "bwd": 2, "act_mem": 1},
               {"name": "critic", "stages": 2, "micro_batches": 4, "fwd": 1, "bwd": 2, "act_mem": 1}]})";
  const sched::Problem p = sched::build_problem(sched::parse_schedspec(spec_text, "spec"));
  const sched::Order order = sched::one_f_one_b(p);
  const sched::Timing timing = sched::evaluate(p, order);
  BOOST_REQUIRE(timing.valid);
  const sched::ScheduleSummary summary = sched::reference_summary(p);
  const fs::path file = test::scratch("report-schedule.json");
  write_text_file(file.string(), sched::schedule_to_json(p, order, timing, sched::lower(p, order, timing), summary).dump());
  std::string why;
  const auto drawn = schedule_file_svg(file, &why);
  BOOST_REQUIRE_MESSAGE(drawn.has_value(), why);
  BOOST_TEST(*drawn == sched::schedule_svg(p, order, timing, summary.serial_peak));

  const fs::path run = fake_run();
  const RunSpec spec = load_run_file(run);
  const std::string svg = report_svg(build_report(spec, Layout(run.parent_path() / "out"), 3), *drawn);
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(count_of(svg, "id=\"schedule\"") == 1);
  BOOST_TEST(svg.find(drawn->substr(0, 200)) != std::string::npos);

  write_text_file(file.string(), "{\"format\": \"braid.schedule\"}");
  BOOST_TEST(!schedule_file_svg(file, &why).has_value());
  BOOST_TEST(why.find("report-schedule.json") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_bad_ablation_file_is_refused_naming_the_field) {
  const fs::path f = test::scratch("bad-ablation.json");
  test::write_file(f, R"({"format": "braid.ablation", "version": 1, "iteration": 1,
    "variants": [{"name": "serial", "measured": {"generate": -1, "total": 3}},
                 {"name": "fused", "measured": {"generate": 1}, "predicted": {"total": "soon"}}]})");
  try {
    read_ablation(f);
    BOOST_FAIL("accepted");
  } catch (const InputError& e) {
    const std::string all = e.what();
    BOOST_TEST(all.find("variants[0].measured.generate") != std::string::npos);
    BOOST_TEST(all.find("variants[1].measured.total: missing") != std::string::npos);
    BOOST_TEST(all.find("variants[1].predicted.total") != std::string::npos);
  }
}
