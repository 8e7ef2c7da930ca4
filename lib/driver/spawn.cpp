#include "driver/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/log.hpp"
#include "core/shell.hpp"

namespace braid::driver {
namespace {

// The children of the pipeline being waited for, so that a SIGINT/SIGTERM/SIGHUP sent to
// the driver alone (kill PID, not the terminal's process group) reaches them too:
// each then removes its unfinished files as it dies.
constexpr int kMaxChildren = 16;
volatile sig_atomic_t g_children[kMaxChildren];
volatile sig_atomic_t g_signal = 0;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void forward_signal(int sig) {
  g_signal = sig;
  for (int i = 0; i < kMaxChildren; ++i) {
    if (g_children[i] > 0) ::kill(static_cast<pid_t>(g_children[i]), sig);
  }
}

// Forwards the signals while alive; afterwards the driver's own handlers are back, and
// a signal that came meanwhile is raised again so that the driver ends as it asked.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_signal = 0;
    for (auto& c : g_children) c = -1;
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &sa, &old_[i]);
  }
  ~SignalForwarding() {
    for (std::size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &old_[i], nullptr);
    for (auto& c : g_children) c = -1;
  }
  void watch(std::size_t i, pid_t pid) { g_children[i] = pid; }
  // Raises the signal that came while the children ran, if one did.
  static void raise_received() {
    if (g_signal != 0) ::raise(g_signal);
  }

 private:
  struct sigaction old_[std::size(kForwarded)];
};

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Makes `fd` the child's `target` (0 or 1); async-signal-safe, for the child after fork.
bool redirect(int fd, int target) {
  if (fd < 0) return true;
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;  // keep it across exec
  return ::dup2(fd, target) == target;
}

// Starts argv with the given stdin/stdout (-1: inherited). Returns the pid, or -errno.
// The child asks the kernel for SIGTERM when the driver dies (PR_SET_PDEATHSIG), so a
// `kill -9` of braid run, which no handler sees, still ends the stage tools (they then
// remove their unfinished files); getppid() afterwards catches a driver that died
// before the request. exec's errno comes back through a close-on-exec pipe.
pid_t spawn(const std::vector<std::string>& argv, int in, int out) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -errno;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    return -e;
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : kForwarded) ::sigaction(sig, &dfl, nullptr);
    int e = 0;
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) e = errno;
    if (e == 0 && ::getppid() != parent) ::_exit(128 + SIGTERM);  // the driver is gone already
    if (e == 0 && !(redirect(in, STDIN_FILENO) && redirect(out, STDOUT_FILENO))) e = errno;
    if (e == 0) {
      ::execvp(args[0], args.data());
      e = errno;
    }
    while (::write(report[1], &e, sizeof e) < 0 && errno == EINTR) {
    }
    ::_exit(127);
  }
  ::close(report[1]);
  int e = 0;
  ssize_t n = 0;
  while ((n = ::read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return -e;
  }
  return pid;
}

}  // namespace

std::string ProcessFailure::describe() const {
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, ::strsignal(signal));
  return fmt::format("exit code {}", exit_code);
}

namespace {

// feeds_next[i]: process i's stdout is process i + 1's stdin (else /dev/null).
std::optional<ProcessFailure> run_children(const std::vector<Process>& processes, const std::vector<bool>& feeds_next,
                                           SignalForwarding& forwarding) {
  Fd devnull;
  devnull.fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull.fd < 0) throw std::runtime_error(fmt::format("cannot open /dev/null: {}", std::strerror(errno)));

  std::vector<pid_t> pids(processes.size(), -1);
  std::optional<ProcessFailure> first;
  auto failure = [&](std::size_t i, int code, int sig) {
    return ProcessFailure{.stage = processes[i].stage, .command = shell_line(processes[i].argv), .exit_code = code,
                          .signal = sig};
  };

  Fd upstream;  // read end of the pipe from the previous process
  for (std::size_t i = 0; i < processes.size(); ++i) {
    Fd read_end, write_end;
    int out = devnull.fd;
    if (feeds_next[i]) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
      read_end.fd = fds[0];
      write_end.fd = fds[1];
      out = write_end.fd;
    }
    log::debug("starting {}: {}", processes[i].stage, shell_line(processes[i].argv));
    const pid_t pid = spawn(processes[i].argv, upstream.fd, out);
    if (pid < 0) {
      log::error("cannot start {}: {}", processes[i].argv[0], std::strerror(static_cast<int>(-pid)));
      if (!first) first = failure(i, 127, 0);
    } else {
      pids[i] = pid;
      forwarding.watch(i, pid);
    }
    // The parent keeps no pipe ends, so each reader sees EOF when its writer exits.
    upstream.reset();
    upstream.fd = read_end.fd;
    read_end.fd = -1;
  }
  upstream.reset();

  std::size_t running = 0;
  for (pid_t p : pids) running += p > 0 ? 1 : 0;
  if (first) {
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGTERM);
    }
  }
  while (running > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("waitpid: {}", std::strerror(errno)));
    }
    std::size_t i = 0;
    while (i < pids.size() && pids[i] != done) ++i;
    if (i == pids.size()) continue;  // not one of ours
    pids[i] = -1;
    forwarding.watch(i, -1);
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok || first) continue;
    first = WIFSIGNALED(status) ? failure(i, 0, WTERMSIG(status)) : failure(i, WEXITSTATUS(status), 0);
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGTERM);
    }
  }
  return first;
}

}  // namespace

std::optional<ProcessFailure> run_pipeline(const std::vector<Process>& processes) {
  return run_pipelines({processes});
}

std::optional<ProcessFailure> run_pipelines(const std::vector<std::vector<Process>>& pipelines) {
  std::vector<Process> processes;
  std::vector<bool> feeds_next;
  for (const auto& p : pipelines) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      processes.push_back(p[i]);
      feeds_next.push_back(i + 1 < p.size());
    }
  }
  if (processes.empty()) return std::nullopt;
  if (processes.size() > static_cast<std::size_t>(kMaxChildren)) throw std::invalid_argument("too many processes");
  std::optional<ProcessFailure> first;
  {
    SignalForwarding forwarding;
    first = run_children(processes, feeds_next, forwarding);
  }
  SignalForwarding::raise_received();
  return first;
}

}  // namespace braid::driver
