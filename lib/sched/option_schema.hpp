// braid-schedgen's options, declared once (core/option_schema.hpp): its command line
// (tools/schedgen/main.cpp), the annealer's knobs that a spec's "anneal" block and the
// presets set by their keys, and the docs' tables (`braid options braid-schedgen`,
// `braid options braid-schedgen-presets`).
//
// A run takes each knob from the command line where a flag gave it, else from the spec's
// "anneal" block, else from the preset (`--preset`, "default" unless told).
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/option_schema.hpp"
#include "sched/schedgen.hpp"

namespace braid::sched {

// The annealer's knobs (AnnealOptions), each by its key in the "anneal" block; the two
// budgets among them (--mem-iterations, --mem-exact-nodes) are flags too.
const cli::OptionSchema<AnnealOptions>& anneal_schema();
// braid-schedgen's command line: the everyday options, then the knobs (those without a
// flag are for the docs' table and the "anneal" block alone).
const cli::OptionSchema<SchedgenOptions>& schedgen_schema();

// A named set of knobs, written as an "anneal" block; "default" changes none.
struct AnnealPreset {
  std::string name;
  std::string use;   // what it is for, as the docs say it
  json knobs;        // an "anneal" block
};
const std::vector<AnnealPreset>& anneal_presets();
std::vector<std::string> preset_names();

// Checks a spec's "anneal" block, a JSON object of knob: value (every problem into c,
// naming where.key: a key that is no knob's, a wrong type, a value out of bounds).
void check_anneal_block(Checker& c, const json& block, std::string_view where);

// After the command line is parsed: the usage errors (a spec and --verify, neither),
// the time limit an iteration budget alone leaves off, and which knobs the flags gave.
void finish_command_line(const CLI::App& app, SchedgenOptions& opt);

// The knobs a run uses: the preset's, then the spec's "anneal" block (`block`, checked
// when the spec was read) over them, then those opt.knobs_given over both.
void settle_knobs(SchedgenOptions& opt, const json& block);

// Every knob of o by its key, in the schema's order: what the schedule's search.anneal
// records (the "anneal" block that repeats the run).
ordered_json knob_record(const AnnealOptions& o);

}  // namespace braid::sched
