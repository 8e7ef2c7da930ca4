#include "score/scorer_process.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

extern char** environ;

namespace braid::score {
namespace {

constexpr const char* kRewardCmd = "--reward-cmd";
using Clock = std::chrono::steady_clock;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "an unknown status";
}

std::string shown(std::string_view line) {
  const std::string s(line.substr(0, 60));
  return json(s + (line.size() > 60 ? "..." : "")).dump(-1, ' ', false, json::error_handler_t::replace);
}

// write() with SIGPIPE held back: a scorer that closed its stdin makes write fail
// with EPIPE instead of killing us; the signal that was raised is then taken.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const ssize_t n = ::write(fd, data, size);
  const int saved = errno;
  if (n < 0 && saved == EPIPE) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

// "nan", "inf", "1e999": a number, but none a reward can be.
bool non_finite_number(const std::string& line) {
  const auto b = line.find_first_not_of(" \t");
  if (b == std::string::npos) return false;
  const char* start = line.c_str() + b;
  char* end = nullptr;
  const double x = std::strtod(start, &end);
  if (end == start) return false;
  while (*end == ' ' || *end == '\t') ++end;
  return *end == '\0' && !std::isfinite(x);
}

}  // namespace

ScorerProcess::ScorerProcess(ScorerOptions opt) : opt_(std::move(opt)) {
  if (opt_.command.empty()) throw InputError("", kRewardCmd, "is empty: give a command line that reads JSON lines");
  if (!(opt_.timeout_seconds > 0)) throw InputError("", "--reward-cmd-timeout", "must be > 0 seconds");
}

ScorerProcess::~ScorerProcess() {
  if (pid_ > 0 && !exited_) stop();
  close_input();
  if (from_child_ >= 0) ::close(from_child_);
}

void ScorerProcess::fail(const std::string& problem) {
  if (pid_ > 0 && !exited_) stop();
  throw InputError("", kRewardCmd, fmt::format("'{}' {}", opt_.command, problem));
}

void ScorerProcess::start() {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!opt_.dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, opt_.dir.c_str());

  std::vector<std::string> env_text;
  bool python_set = false;
  for (char** e = environ; e && *e; ++e) {
    env_text.emplace_back(*e);
    python_set = python_set || env_text.back().rfind("PYTHONUNBUFFERED=", 0) == 0;
  }
  if (!python_set) env_text.emplace_back("PYTHONUNBUFFERED=1");
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = opt_.command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  // A process group of its own: whatever the command starts (a pipeline, a script's
  // children) is stopped with it, and none is left behind holding the pipes.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw InputError("", kRewardCmd,
                     fmt::format("'{}' cannot be started{}: {}", opt_.command,
                                 opt_.dir.empty() ? "" : fmt::format(" in {}", opt_.dir), std::strerror(rc)));
  }
  pid_ = pid;
  end_group_on_signals(pid_);  // our own death by SIGINT/SIGTERM/SIGHUP ends the group too
  to_child_ = in[1];
  from_child_ = out[0];
  ::fcntl(to_child_, F_SETFL, ::fcntl(to_child_, F_GETFL) | O_NONBLOCK);
  ::fcntl(from_child_, F_SETFL, ::fcntl(from_child_, F_GETFL) | O_NONBLOCK);
  log::debug("started the scorer '{}' (pid {})", opt_.command, pid_);
}

void ScorerProcess::close_input() {
  if (to_child_ >= 0) ::close(to_child_);
  to_child_ = -1;
}

std::string ScorerProcess::wait_status(double seconds) {
  if (pid_ <= 0) return "not started";
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (!exited_) {
    siginfo_t info{};
    const int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid_) {
      // Ended. What it started goes with it: its group, whose id cannot be taken by another
      // process while the leader is not reaped yet.
      ::kill(-pid_, SIGKILL);
      while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
      }
      exited_ = true;
      forget_group_on_signals(pid_);
      break;
    }
    if (r < 0 && errno != EINTR) {
      exited_ = true;
      forget_group_on_signals(pid_);
      break;
    }
    if (Clock::now() >= until) return "still running";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return describe_status(status_);
}

void ScorerProcess::stop() {
  close_input();
  if (wait_status(0.5) != "still running") return;
  ::kill(-pid_, SIGTERM);
  if (wait_status(2.0) != "still running") return;
  ::kill(-pid_, SIGKILL);
  wait_status(1e9);
}

std::vector<double> ScorerProcess::exchange(std::span<const std::string> lines, std::span<const std::string> names) {
  if (lines.empty()) return {};
  if (pid_ <= 0) start();
  if (exited_ || to_child_ < 0) fail("is no longer running (it ended after an earlier batch)");
  std::string payload;
  for (const auto& l : lines) {
    if (l.find('\n') != std::string::npos) throw std::invalid_argument("ScorerProcess: a line holds a newline");
    payload += l;
    payload += '\n';
  }
  const auto name = [&](std::size_t i) {
    return i < names.size() && !names[i].empty() ? fmt::format(" (for {})", names[i]) : std::string();
  };
  std::vector<double> rewards;
  rewards.reserve(lines.size());
  std::size_t written = 0;
  bool input_closed = false;  // the scorer stopped reading
  auto last_progress = Clock::now();
  char buf[65536];
  while (rewards.size() < lines.size()) {
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {to_child_, POLLOUT, 0}};
    const nfds_t n = written < payload.size() && !input_closed ? 2 : 1;
    const double left = opt_.timeout_seconds - std::chrono::duration<double>(Clock::now() - last_progress).count();
    if (left <= 0) {
      fail(fmt::format("gave no answer for {:g} s ({} of {} rewards so far; does it flush its output after each line?)",
                       opt_.timeout_seconds, rewards.size(), lines.size()));
    }
    const int ready = ::poll(fds, n, static_cast<int>(std::min(left * 1000.0, 1000.0)) + 1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    }
    if (n == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = write_no_sigpipe(to_child_, payload.data() + written, payload.size() - written);
      if (w > 0) {
        written += static_cast<std::size_t>(w);
        last_progress = Clock::now();
      } else if (w < 0 && errno == EPIPE) {
        input_closed = true;  // its answers (or its end) tell what happened
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        fail(fmt::format("cannot be written to: {}", std::strerror(errno)));
      }
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t r = ::read(from_child_, buf, sizeof buf);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail(fmt::format("cannot be read from: {}", std::strerror(errno)));
    }
    if (r == 0) {
      close_input();
      const std::string status = wait_status(opt_.timeout_seconds);
      fail(fmt::format("ended its output after {} of {} rewards ({}): it must answer one line per sample{}",
                       rewards.size(), lines.size(), status,
                       pending_.empty() ? "" : fmt::format("; its last, unfinished line was {}", shown(pending_))));
    }
    last_progress = Clock::now();
    pending_.append(buf, static_cast<std::size_t>(r));
    for (std::size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::size_t i = rewards.size();
      if (i == lines.size()) {
        fail(fmt::format("answered more lines than the {} it was given (the extra one: {})", lines.size(), shown(line)));
      }
      const json v = parse_json_or_discarded(line);
      if (!v.is_number() && !non_finite_number(line)) {
        fail(fmt::format("answered line {} of {}{} with {}, expected a number (one reward per line)", i + 1,
                         lines.size(), name(i), shown(line)));
      }
      const double x = v.is_number() ? v.get<double>() : std::numeric_limits<double>::infinity();
      if (!std::isfinite(x) || std::abs(x) > double(std::numeric_limits<float>::max())) {
        fail(fmt::format("answered line {} of {}{} with {}, which is not a finite number (as a float32 reward)", i + 1, lines.size(), name(i),
                         shown(line)));
      }
      rewards.push_back(x);
    }
  }
  // Whatever it has written beyond its answers by now is one too many (a later extra line
  // shows at the next exchange or at finish()).
  pollfd more{from_child_, POLLIN, 0};
  if (::poll(&more, 1, 0) > 0 && (more.revents & POLLIN)) {
    const ssize_t r = ::read(from_child_, buf, sizeof buf);
    if (r > 0) pending_.append(buf, static_cast<std::size_t>(r));
  }
  if (!pending_.empty()) {
    fail(fmt::format("answered more than the {} lines it was given (it went on with {})", lines.size(), shown(pending_)));
  }
  return rewards;
}

bool ScorerProcess::finish() {
  if (pid_ <= 0 || exited_) return true;
  close_input();
  // Anything it still writes is an answer to no line.
  const auto until = Clock::now() + std::chrono::duration<double>(opt_.timeout_seconds);
  char buf[4096];
  for (;;) {
    pollfd fd{from_child_, POLLIN, 0};
    const double left = std::chrono::duration<double>(until - Clock::now()).count();
    if (left <= 0) {
      log::warn("the scorer '{}' is still running {:g} s after its input ended: stopped", opt_.command,
                opt_.timeout_seconds);
      stop();
      return false;
    }
    if (::poll(&fd, 1, static_cast<int>(std::min(left * 1000.0, 1000.0)) + 1) <= 0) continue;
    const ssize_t r = ::read(from_child_, buf, sizeof buf);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) break;
    pending_.append(buf, static_cast<std::size_t>(r));
  }
  if (!pending_.empty()) fail(fmt::format("wrote {} after its last answer (more lines than samples)", shown(pending_)));
  const std::string status = wait_status(opt_.timeout_seconds);
  if (exited_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0) return true;
  log::warn("the scorer '{}' ended with {} after answering every sample", opt_.command, status);
  if (!exited_) stop();
  return false;
}

}  // namespace braid::score
