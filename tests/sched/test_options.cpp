// braid-schedgen's knobs: the presets, a spec's "anneal" block (read strictly) and the
// command line, taken in that order; the record of the knobs a run used; every knob acts.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/mpi.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "sched/option_schema.hpp"
#include "sched/problem.hpp"
#include "tests/common/input_error.hpp"
#include "tests/common/mpi_fixture.hpp"
#include "tests/common/scratch.hpp"

using namespace braid;
using namespace braid::sched;
using braid::test::contains;
using braid::test::MpiFixture;

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);  // run_schedgen searches on a communicator (one rank here)

namespace {

const std::string kSpec = R"({"format": "braid.schedspec", "version": 1, "devices": 2,
 "models": [{"name": "actor", "stages": 2, "micro_batches": 2, "fwd": 1, "bwd": 2, "act_mem": 1},
            {"name": "critic", "stages": 2, "micro_batches": 2, "fwd": 1, "bwd": 2, "act_mem": 1}])";

// The spec above with an "anneal" block.
std::string spec_with(const std::string& block) { return kSpec + R"(, "anneal": )" + block + "}"; }

// braid-schedgen's options after its command line (args after the program name).
SchedgenOptions command_line(std::vector<std::string> args) {
  CLI::App app;
  SchedgenOptions opt;
  cli::add_schema_options(app, opt, schedgen_schema());
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  finish_command_line(app, opt);
  return opt;
}

// ... and the knobs settled over a spec's block.
SchedgenOptions run_options(std::vector<std::string> args, const json& block) {
  SchedgenOptions opt = command_line(std::move(args));
  settle_knobs(opt, block);
  return opt;
}

// The schedule of a short search of Table 3's int 8/4 GBS 16 from 1F1B (short rounds, the
// memory phase cut short) with `changed` over those knobs, without its clock readings and
// the record of its knobs: what the knobs made.
json short_run(const json& changed) {
  json spec = json::parse(read_text_file(braid::test::source("examples/schedgen/table3int_33B_13B_pp8_4_gbs16.json").string()));
  spec["anneal"] = {{"alpha", 0.999}, {"epsilon", 1}, {"mem_iterations", 20000}, {"mem_exact_nodes", 200}};
  spec["anneal"].update(changed);
  const std::string path = braid::test::scratch("knobs.spec.json").string(), out = braid::test::scratch("knobs.json").string();
  write_text_file(path, spec.dump());
  const SchedgenOptions opt = command_line({path, "--start", "1f1b", "--iterations", "20000", "-o", out});
  BOOST_REQUIRE(run_schedgen(opt, *comm::mpi_world()) == 0);
  json s = json::parse(read_text_file(out));
  for (const char* k : {"seconds", "seconds_to_best", "seconds_to_bound", "mem_seconds", "anneal", "preset"}) s["search"].erase(k);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_default_preset_changes_no_knob_and_every_preset_is_an_anneal_block) {
  const SchedgenOptions def = run_options({"spec.json"}, json::object());
  BOOST_TEST(knob_record(def.anneal).dump() == knob_record(AnnealOptions{}).dump());
  BOOST_TEST(def.preset == "default");
  for (const AnnealPreset& p : anneal_presets()) {
    Checker c("presets");
    check_anneal_block(c, p.knobs, p.name);
    BOOST_TEST(c.ok(), p.name << ": " << (c.ok() ? "" : c.problems().front()));
    const SchedgenOptions o = run_options({"spec.json", "--preset", p.name}, json::object());
    BOOST_TEST((knob_record(o.anneal) == knob_record(AnnealOptions{})) == (p.name == "default"), p.name);
  }
}

// preset < the spec's "anneal" block < a flag, knob by knob.
BOOST_AUTO_TEST_CASE(a_flag_goes_over_the_block_and_the_block_over_the_preset) {
  const json block = {{"mem_iterations", 5}, {"mem_polish", 3}, {"tie_break", "flow"}};
  const SchedgenOptions o = run_options({"spec.json", "--preset", "quick", "--mem-iterations", "7"}, block);
  BOOST_TEST(o.anneal.mem_iterations == 7u);                     // flag over block and preset
  BOOST_TEST(o.anneal.mem_polish == 3u);                         // block over the default
  BOOST_TEST(tie_break_name(o.anneal.tie_break) == std::string("flow"));
  BOOST_TEST(o.anneal.mem_exact_nodes == 2000u);                 // quick's, as neither says otherwise
  BOOST_TEST(o.anneal.alpha == AnnealOptions{}.alpha);
  const json exact = {{"mem_exact_nodes", 9}};
  BOOST_TEST(run_options({"spec.json", "--preset", "quick"}, exact).anneal.mem_exact_nodes == 9u);
  BOOST_TEST(run_options({"spec.json", "--preset", "quick", "--mem-exact-nodes", "0"}, exact).anneal.mem_exact_nodes == 0u);
}

// The record of a run's knobs, given back as a block, gives the same knobs.
BOOST_AUTO_TEST_CASE(the_record_of_the_knobs_repeats_them_as_a_block) {
  const json block = {{"alpha", 0.99}, {"t0_cycle", {1, 0.5}}, {"restart", false}, {"share", false},
                      {"tie_break", "none"}, {"mem_level_margin", 1e9}, {"sync_every", 1000}};
  const SchedgenOptions o = run_options({"spec.json", "--preset", "thorough"}, block);
  const ordered_json record = knob_record(o.anneal);
  const SchedgenOptions again = run_options({"spec.json"}, json::parse(record.dump()));
  BOOST_TEST(knob_record(again.anneal) == record);
  BOOST_TEST(record["t0_cycle"].size() == 2u);
  BOOST_TEST(record["restart"] == false);
  BOOST_TEST(parse_schedspec(spec_with(record.dump()), "spec.json").anneal.size() == record.size());
}

BOOST_AUTO_TEST_CASE(a_bad_anneal_block_is_refused_naming_the_file_and_every_field) {
  const auto problems = braid::test::problems_of(
      [] {
        parse_schedspec(spec_with(R"({"alpah": 0.9, "alpha": "hot", "chain_moves": 1.5, "mem_polish": -1,
                                      "t0_cycle": [], "tie_break": "slack", "restart": 1, "sync_every": 2.5})"),
                        "spec.json");
      },
      "spec.json");
  const std::vector<std::string> fields = {"anneal.alpah", "anneal.alpha", "anneal.chain_moves", "anneal.mem_polish",
                                           "anneal.t0_cycle", "anneal.tie_break", "anneal.restart", "anneal.sync_every"};
  BOOST_TEST(problems.size() == fields.size());
  for (const auto& f : fields) {
    BOOST_TEST(std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return contains(p, f + ":"); }), f);
  }
  BOOST_TEST(contains(braid::test::refusal([] { parse_schedspec(spec_with("[1]"), "spec.json"); }), "anneal"));
  BOOST_TEST(parse_schedspec(kSpec + "}", "spec.json").anneal.empty());
}

// Each knob, changed, changes what a run makes (its orders, or what its search counted),
// but those that act only where this short run does not reach: a polish follows a pass
// that stalls (20M neighbours without a lower peak), and the ranks' meetings need ranks
// (cli_schedgen.sh runs them under mpirun).
BOOST_AUTO_TEST_CASE(every_knob_changes_what_a_run_makes) {
  log::set_level(log::Level::quiet);
  const json base = short_run(json::object());
  const std::vector<std::pair<std::string, json>> changes = {
      {"t0", 20},         {"t0_factor", 3},        {"t0_cycle", {0.1}},     {"alpha", 0.99},
      {"epsilon", 2},     {"tie_break", "none"},   {"tie_weight", 20},      {"restart", false},
      {"chain_moves", 0.5}, {"critical_moves", 0}, {"mem_weight", 1},       {"mem_iterations", 5000},
      {"mem_t0_factor", 3}, {"mem_chain_moves", 0.5}, {"mem_level_margin", 1e9}, {"mem_resequence", false},
      {"mem_exact_nodes", 0}};
  std::vector<std::string> covered = {"mem_polish", "sync_every", "sync_seconds", "share"};
  for (const auto& [key, value] : changes) {
    const std::string k = key;  // copies of the structured bindings (clang before 16 captures none)
    const json v = value;
    BOOST_TEST(short_run({{k, v}}) != base, k << " = " << v.dump() << " made the same schedule");
    covered.push_back(k);
  }
  std::vector<std::string> knobs;
  for (const auto& e : anneal_schema()) knobs.push_back(e.spec.key);
  std::sort(knobs.begin(), knobs.end());
  std::sort(covered.begin(), covered.end());
  BOOST_TEST(knobs == covered, "a knob this test does not change");
}
