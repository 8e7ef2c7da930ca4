// An external scorer (braid-score --reward-cmd 'CMD'): a child process that reads one
// JSON line per sample on its stdin and answers one reward per line on its stdout, in
// order. It is started once (through /bin/sh -c, at the first exchange) and serves the
// whole run; at the end its stdin is closed and it is waited for. Its stderr is ours.
//
//   ScorerProcess p({.command = "python3 scorer.py"});
//   std::vector<double> r = p.exchange({R"({"prompt": "1+1=", "response": "2"})"});
//   p.finish();
//
// Writing and reading overlap (poll), so a scorer that answers each line as it reads it
// never blocks on a full pipe, however many lines a batch holds. The child's environment
// gets PYTHONUNBUFFERED=1 (unless set), so a Python scorer's print() reaches us without
// an explicit flush; a scorer in another language must flush after each answer.
//
// The command runs in a process group of its own: when it is stopped (a timeout, a bad
// answer, our exit) or ends, the whole group is killed and the command reaped, so no child
// of it is left running with our pipes; our death by SIGINT/SIGTERM/SIGHUP ends it too.
//
// Every failure is an InputError naming --reward-cmd and the command: a command that
// cannot start, exits or closes its output before answering every line (too few lines,
// with its exit status), answers a line that is not a JSON number (garbage), a number
// that is not finite, more lines than it was given, or nothing for `timeout_seconds`.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <sys/types.h>

namespace braid::score {

struct ScorerOptions {
  std::string command;              // a shell command line
  std::string dir;                  // its working directory ("" = ours)
  double timeout_seconds = 600;     // the longest wait for the next answer
};

class ScorerProcess {
 public:
  explicit ScorerProcess(ScorerOptions opt);
  ~ScorerProcess();  // a scorer still running gets its stdin closed, then SIGTERM
  ScorerProcess(const ScorerProcess&) = delete;
  ScorerProcess& operator=(const ScorerProcess&) = delete;

  // Sends each line (JSON text, no newline inside) and returns the rewards, one per
  // line. `names` (optional, one per line) say in messages which sample a bad answer was for.
  std::vector<double> exchange(std::span<const std::string> lines, std::span<const std::string> names = {});

  // Closes the scorer's stdin and waits for it to exit (up to the timeout, then it is
  // killed). InputError when it writes more after its last answer; returns false (and
  // logs a warning) when it exits with a failure status after answering everything.
  bool finish();

  const std::string& command() const { return opt_.command; }
  bool started() const { return pid_ > 0; }

 private:
  void start();
  [[noreturn]] void fail(const std::string& problem);
  // "exit code 3" / "killed by signal 9", waiting up to the timeout for the exit.
  std::string wait_status(double seconds);
  void close_input();
  void stop();  // SIGTERM to its group, then SIGKILL, and reap

  ScorerOptions opt_;
  pid_t pid_ = -1;
  int to_child_ = -1;    // its stdin
  int from_child_ = -1;  // its stdout
  std::string pending_;  // output read beyond the last whole line
  bool exited_ = false;
  int status_ = 0;
};

}  // namespace braid::score
