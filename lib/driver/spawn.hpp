// Starting the stage tools as child processes: fork and execvp with argv as given
// (no shell, so user paths are never re-parsed), stdout of each process piped
// into the next one's stdin, and every exit status checked. Each child gets
// SIGTERM from the kernel when the driver dies (PR_SET_PDEATHSIG), however it dies.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace braid::driver {

struct Process {
  std::string stage;               // named in messages ("generate")
  std::vector<std::string> argv;   // argv[0] is looked up on PATH when it has no '/'
};

// How a process of a pipeline ended when it did not succeed.
struct ProcessFailure {
  std::string stage;
  std::string command;   // the argv as a shell line, for the message
  int exit_code = 0;     // its exit code, or 0 when a signal ended it
  int signal = 0;
  std::string describe() const;   // "exit code 2", "killed by signal 15"
};

// Runs the processes at once, each one's stdout feeding the next one's stdin; the
// last one's stdout goes to /dev/null and every stderr stays the driver's. Waits
// for all. Returns the first process to fail (by time of exit: the others then
// get SIGTERM, as what they do is of no use any more), or nothing when all exit 0.
// A process that cannot be started fails with exit code 127.
std::optional<ProcessFailure> run_pipeline(const std::vector<Process>& processes);

// Several pipelines at once (`braid run`'s asynchronous mode: one iteration's training
// beside the next one's generate | score): each pipeline's processes piped as above,
// the pipelines independent of each other. Waits for all; the first failure ends every
// process of every pipeline, and is returned.
std::optional<ProcessFailure> run_pipelines(const std::vector<std::vector<Process>>& pipelines);

}  // namespace braid::driver
