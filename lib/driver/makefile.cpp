#include "driver/makefile.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "driver/run_lock.hpp"
#include "core/shell.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

// A file name as a make target or prerequisite; make has no quoting for these characters.
std::string target(const fs::path& p, const RunSpec& spec) {
  const std::string s = p.string();
  if (s.empty() || s.find_first_of(" \t\n:#$%*?[]\\;=|") != std::string::npos) {
    throw InputError(spec.file.string(), s, "cannot be named in a Makefile (white space or one of : # $ % * ? [ ] \\ ; = |): "
                                            "use braid run, or rename it");
  }
  return s;
}

std::string targets(const std::vector<fs::path>& paths, const RunSpec& spec) {
  std::string out;
  for (const auto& p : paths) {
    if (!out.empty()) out += ' ';
    out += target(p, spec);
  }
  return out;
}

// A shell word inside a recipe: make expands '$', so it is doubled.
std::string recipe_word(const std::string& word) {
  std::string out;
  for (char ch : shell_quote(word)) {
    out += ch;
    if (ch == '$') out += '$';
  }
  return out;
}

struct ToolVar {
  std::string path;
  const char* var;
};

std::vector<ToolVar> tool_vars(const Tools& t) {
  return {{t.braid, "BRAID"}, {t.generate, "BRAID_GENERATE"}, {t.score, "BRAID_SCORE"},
          {t.train, "BRAID_TRAIN"}, {t.mpirun, "MPIRUN"}};
}

std::string recipe_command(const Command& c, const Tools& tools) {
  std::string line;
  for (std::size_t i = 0; i <= c.argv.size(); ++i) {
    if (c.shards_from && i == c.shards_at) {
      line += ' ' + recipe_word(c.shards_from->string()) + '/' + c.shards_pattern;
    }
    if (i == c.argv.size()) break;
    std::string word = recipe_word(c.argv[i]);
    for (const auto& tv : tool_vars(tools)) {
      // The program: the first word, or the one mpirun starts.
      if (c.argv[i] == tv.path && (i == 0 || c.argv.front() == tools.mpirun)) word = fmt::format("$({})", tv.var);
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  return line;
}

std::string rule(const Step& step, const RunSpec& spec, const Tools& tools) {
  std::string text = fmt::format("# {}\n", step.name);
  for (const auto& note : step.notes) text += note + "\n";
  const std::string outs = targets(step.outputs, spec);
  text += fmt::format("{}{} {}\n", outs, step.outputs.size() > 1 ? " &:" : ":", targets(step.inputs, spec));
  std::vector<std::string> dirs;
  for (const auto& out : step.outputs) {
    const std::string d = out.parent_path().string();
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  for (const auto& d : dirs) text += fmt::format("\t@mkdir -p {}\n", recipe_word(d));
  if (step.restart) {
    // Never continued from a partial attempt: made again whole (generate --overcommit).
    std::vector<std::string> stale;
    for (const auto& p : step.stale) stale.push_back(recipe_word(p.string()));
    text += fmt::format("\t@$(BRAID_LOCK) rm -rf {}\n", fmt::join(stale, " "));
  } else if (!step.stale.empty()) {
    // An output older than an input was made from an older model: the tools would keep it, so it goes.
    std::vector<std::string> tests;
    for (const auto& out : step.outputs) {
      for (const auto& in : step.inputs) {
        tests.push_back(fmt::format("{{ [ -e {0} ] && [ {0} -ot {1} ]; }}", recipe_word(out.string()),
                                    recipe_word(in.string())));
      }
    }
    std::vector<std::string> stale;
    for (const auto& p : step.stale) stale.push_back(recipe_word(p.string()));
    text += fmt::format("\t@$(BRAID_LOCK) if {}; then rm -rf {}; fi\n", fmt::join(tests, " || "), fmt::join(stale, " "));
  }
  std::vector<std::string> commands;
  for (const auto& c : step.pipeline) commands.push_back(recipe_command(c, tools));
  text += fmt::format("\t$(BRAID_LOCK) {} >/dev/null\n", fmt::join(commands, " | "));
  if (!step.then.empty()) {
    std::vector<std::string> then;
    for (const auto& c : step.then) then.push_back(recipe_command(c, tools));
    text += fmt::format("\t$(BRAID_LOCK) {} >/dev/null\n", fmt::join(then, " | "));
  }
  text += "\n";
  return text;
}

}  // namespace

std::string makefile_text(const RunSpec& spec, const Layout& layout, const MakefileOptions& opt) {
  if (spec.checkpoints) {
    throw InputError(spec.file.string(), "checkpoints",
                     "the checkpoints of earlier iterations are a Makefile's targets, which make would train again "
                     "once removed: run it with braid run (or leave the section out)");
  }
  if (spec.data && spec.data->dynamic_rounds > 0) {
    throw InputError(spec.file.string(), "data.dynamic_sampling",
                     "a Makefile holds every command beforehand, and whether an iteration rolls out again depends on "
                     "the rewards of its first rollout: run it with braid run (or \"dynamic_sampling\": false)");
  }
  if (spec.kl_target && spec.iterations > 1) {
    throw InputError(spec.file.string(), "score.kl_target",
                     "a Makefile holds every command beforehand, and the adaptive KL coefficient of each iteration "
                     "comes from the previous one's measured KL: run it with braid run");
  }
  if (spec.ablation) {
    throw InputError(spec.file.string(), "ablation",
                     "the ablation times each stage of a re-run one after the other, which make -j would run beside "
                     "other work: run it with braid run (or leave the section out of the Makefile's run file)");
  }
  const PlanOptions plan{.tools = opt.tools, .verbosity = {}};
  std::string text;
  text += fmt::format("# {}\n", opt.command_line);
  text += "# The run as make rules: `make` does what `braid run` does, and `make -j` is safe.\n"
          "# With \"async\": true in the run file, `make -j2` runs an iteration's training beside the next\n"
          "# iteration's generate | score, as braid run does (that rollout reads the actor one step older).\n"
          "# Paths are relative to the folder this was written from: run make there.\n\n";
  if (spec.run_plan && spec.run_plan->applied) {
    for (const auto& line : spec.run_plan->summary()) text += line + "\n";
    text += "\n";
  }
  text += "SHELL := /bin/bash\n.SHELLFLAGS := -o pipefail -ec\n\n";
  for (const auto& tv : tool_vars(opt.tools)) text += fmt::format("{} ?= {}\n", tv.var, recipe_word(tv.path));
  // The run folder's lock (driver/run_lock.hpp): each recipe's shell opens the lock file on
  // descriptor 9, and braid run-lock takes it shared there (held by the recipe's tools) and
  // records this make ($$PPID, the recipe shell's parent) as the folder's holder. Recipes of
  // one make -j run side by side; a braid run or a second make in the folder is refused
  // (exit 2, naming the holder). The last rule runs braid run itself, which works under
  // the make that started it, so it goes without.
  text += fmt::format("BRAID_LOCK = exec 9>>{0} && $(BRAID) run-lock {1} --owner $$PPID --fd 9 &&\n",
                      recipe_word(run_lock_file(layout.out()).string()), recipe_word(layout.out().string()));

  const std::vector<fs::path> last = trained_checkpoints(spec, layout, spec.iterations);
  const fs::path metrics = layout.metrics_file();
  text += fmt::format("\n.PHONY: all\nall: {}\n\n", target(metrics, spec));

  std::vector<fs::path> gathered = last;
  for (const auto& step : init_steps(spec, layout, plan)) text += rule(step, spec, opt.tools);
  if (evaluates(spec, 0)) {
    text += rule(eval_step(spec, layout, plan, 0), spec, opt.tools);
    gathered.push_back(layout.eval_file(0));
  }
  for (int i = 1; i <= spec.iterations; ++i) {
    text += rule(rollout_step(spec, layout, plan, i), spec, opt.tools);
    text += rule(train_step(spec, layout, plan, i), spec, opt.tools);
    if (evaluates(spec, i)) {
      text += rule(eval_step(spec, layout, plan, i), spec, opt.tools);
      gathered.push_back(layout.eval_file(i));
    }
  }
  // braid run on a finished run only gathers the iterations' metrics (and writes the report).
  text += fmt::format("# metrics of every iteration\n{}: {}\n", target(metrics, spec), targets(gathered, spec));
  text += fmt::format("\t$(BRAID) run {} -o {} --iterations {}\n", recipe_word(spec.file.string()),
                      recipe_word(layout.out().string()), spec.iterations);
  return text;
}

}  // namespace braid::driver
