#include "fuse/fused_rollout.hpp"

#include "comm/communicator.hpp"
#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "fuse/score_board.hpp"
#include "generate/migrate.hpp"
#include "generate/shard_plan.hpp"
#include "rl/algorithms.hpp"
#include "score/options.hpp"
#include "score/ranks.hpp"
#include "score/stage_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace braid::fuse {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Messages between a rank and the board: {kind, shard}.
using Message = std::array<std::int64_t, 2>;
// A rank sends kReported (a shard it completed) and kGenerationDone in that order, then
// kAsk for each shard it can take (one ahead of the shard it scores); the board answers
// kGive or kNoMore; after kNoMore the rank says kBye, the last message the board
// receives from it (so no receive is left posted).
enum Kind : std::int64_t { kReported = 1, kGenerationDone = 2, kAsk = 3, kGive = 4, kNoMore = 5, kBye = 6 };
constexpr int kTagToBoard = 31;
constexpr int kTagFromBoard = 32;
constexpr int kBoardRank = 0;

// One rank's side of the fused rollout: its scorer, its part of the messages, and (on
// rank 0) the board.
class FusedScoring {
 public:
  FusedScoring(const gen::StageOptions& g, const score::CommandOptions& s, int rank, int ranks,
               comm::Communicator* world)
      : g_(g), s_(s), rank_(rank), ranks_(ranks), world_(world), board_(ranks),
        session_(s, [](const std::filesystem::path& out) { score::print_path_line(out.string()); }) {
    if (is_board() && ranks_ > 1) {
      inbox_.resize(static_cast<std::size_t>(ranks_));
      posted_.resize(static_cast<std::size_t>(ranks_));
      for (int r = 1; r < ranks_; ++r) post(r);
    }
  }

  gen::StageHooks hooks() {
    return {.shard_ready = [this](std::int64_t shard, const std::filesystem::path&) { shard_ready(shard); },
            .poll = [this](bool waiting) { poll(waiting); },
            .after_generation = [this](double generate_seconds) { return after_generation(generate_seconds); }};
  }

 private:
  bool is_board() const { return rank_ == kBoardRank; }

  std::filesystem::path shard_path(std::int64_t shard) const {
    return gen::ShardPlan{.prompts = 0, .samples_per_prompt = 1, .shard_size = 1, .dir = g_.out_dir, .prefix = g_.prefix}
        .path(shard);
  }

  // Any thread (the shard writer's): queued for the main thread, which does all messaging.
  void shard_ready(std::int64_t shard) {
    std::lock_guard lock(mu_);
    mine_.push_back(shard);
  }

  void poll(bool waiting) {
    const auto now = Clock::now();
    if (waiting && last_wait_) waited_ += now - *last_wait_;
    last_wait_ = waiting ? std::optional(now) : std::nullopt;
    report_mine();
    if (is_board()) serve();
    drop_sent();
  }

  // This rank's newly complete shards, to the board.
  void report_mine() {
    std::deque<std::int64_t> shards;
    {
      std::lock_guard lock(mu_);
      shards.swap(mine_);
    }
    for (std::int64_t k : shards) {
      if (is_board()) {
        board_.reported(k);
      } else {
        send({kReported, k});
      }
    }
  }

  void send(Message m) {
    outbox_.push_back({m, {}});
    auto& out = outbox_.back();
    out.request = world_->isend(std::span<const std::int64_t>(out.message), kBoardRank, kTagToBoard);
  }

  void answer(int rank, Message m) {
    outbox_.push_back({m, {}});
    auto& out = outbox_.back();
    out.request = world_->isend(std::span<const std::int64_t>(out.message), rank, kTagFromBoard);
  }

  void drop_sent() {
    while (!outbox_.empty() && outbox_.front().request.test()) outbox_.pop_front();
  }

  void post(int rank) {
    auto& slot = inbox_[static_cast<std::size_t>(rank)];
    posted_[static_cast<std::size_t>(rank)] = world_->irecv(std::span<std::int64_t>(slot), rank, kTagToBoard);
  }

  // The board: takes every message that has arrived, then answers the ranks that asked.
  // Returns how many messages it took.
  int serve(bool board_free = false) {
    int taken = 0;
    for (int r = 1; r < ranks_; ++r) {
      auto& request = posted_[static_cast<std::size_t>(r)];
      while (request.active() && request.test()) {
        ++taken;
        const Message m = inbox_[static_cast<std::size_t>(r)];
        if (m[0] == kReported) board_.reported(m[1]);
        if (m[0] == kGenerationDone) board_.generation_done();
        if (m[0] == kAsk) board_.asked(r, /*ahead=*/m[1] != 0);
        request = comm::Request();
        if (m[0] == kBye) {
          ++byes_;
        } else {
          post(r);
        }
      }
    }
    for (const auto& a : board_.answers(board_free)) answer(a.rank, a.shard ? Message{kGive, *a.shard} : Message{kNoMore, 0});
    return taken;
  }

  void score(std::int64_t shard) {
    const auto from = Clock::now();
    session_.add(shard_path(shard).string());
    const auto to = Clock::now();
    spans_.push_back({seconds(from - gen_start_), seconds(to - gen_start_)});
    ++scored_;
  }

  ordered_json after_generation(double generate_seconds) {
    const auto free_at = Clock::now();
    gen_start_ = free_at - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(generate_seconds));
    last_wait_.reset();
    report_mine();
    if (is_board()) {
      board_.generation_done();
      // Polled, not waited on: the sleeping wait's deadline over the loop, so that a rank
      // that stopped does not leave the board polling forever.
      comm::IdleDeadline idle("the board's wait for the other ranks' shards and byes");
      for (;;) {
        if (serve(/*board_free=*/true) > 0) idle.progressed();
        drop_sent();
        if (auto k = board_.take()) {
          score(*k);
          idle.progressed();
          continue;
        }
        if (board_.over() && byes_ == ranks_ - 1) break;
        idle.check();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      log::info("{}every shard is scored ({} reported)", who(), board_.shards_reported());
    } else {
      send({kGenerationDone, 0});
      // One request ahead: the next shard is asked for when this one starts, so the
      // board's answer (late when rank 0 is busy scoring a shard itself) arrives while
      // this rank scores.
      Message m{};
      send({kAsk, 0});
      comm::Request reply = world_->irecv(std::span<std::int64_t>(m), kBoardRank, kTagFromBoard);
      for (;;) {
        comm::wait_asleep(reply);
        drop_sent();
        if (m[0] != kGive) break;
        const std::int64_t shard = m[1];
        send({kAsk, 1});
        reply = world_->irecv(std::span<std::int64_t>(m), kBoardRank, kTagFromBoard);
        score(shard);
      }
      send({kBye, 0});
    }
    for (auto& out : outbox_) comm::wait_asleep(out.request);
    outbox_.clear();
    session_.finish();
    const auto end = Clock::now();

    // braid-score's --stats: every rank's figures, written once by the board's rank.
    ordered_json mine = session_.stats(seconds(end - free_at));
    if (ranks_ > 1) {
      const auto all = score::gather_on_root(*world_, mine.dump(), kBoardRank);
      if (is_board()) {
        std::vector<ordered_json> docs;
        for (const auto& text : all) docs.push_back(ordered_json::parse(text));
        mine = score::merge_stage_stats(docs);
      }
    }
    if (is_board() && !s_.stats.empty()) write_text_file(s_.stats, mine.dump(2) + "\n");

    const double wall = seconds(end - gen_start_);
    const double waited = seconds(waited_);
    double scoring = 0;
    ordered_json spans = ordered_json::array();
    for (const auto& [from, to] : spans_) {
      scoring += to - from;
      spans.push_back({from, to});
    }
    const double generating = generate_seconds - waited;
    log::info("{}generated {:.2f} s, scored {} shards in {:.2f} s, idle {:.2f} s", who(), generating, scored_, scoring,
              wall - generating - scoring);
    return ordered_json{{"generate_seconds", generating},
                        {"score_seconds", scoring},
                        {"idle_seconds", std::max(0.0, wall - generating - scoring)},
                        {"wall_seconds", wall},
                        {"free_at", generate_seconds},
                        {"shards_scored", scored_},
                        {"score_spans", spans}};
  }

  std::string who() const { return ranks_ > 1 ? fmt::format("rank {}: ", rank_) : ""; }

  struct Outgoing {
    Message message;
    comm::Request request;
  };

  const gen::StageOptions& g_;
  const score::CommandOptions& s_;
  int rank_;
  int ranks_;
  comm::Communicator* world_;
  ScoreBoard board_;
  score::ScoreSession session_;
  std::mutex mu_;
  std::deque<std::int64_t> mine_;          // complete shards not yet reported
  std::deque<Outgoing> outbox_;            // sends in flight (their buffers live here)
  std::vector<Message> inbox_;             // the board: one posted receive per rank
  std::vector<comm::Request> posted_;
  std::optional<Clock::time_point> last_wait_;
  Clock::duration waited_{};
  Clock::time_point gen_start_;
  std::vector<std::pair<double, double>> spans_;
  std::int64_t scored_ = 0;
  int byes_ = 0;

 public:
  // A run that fails midway leaves the board's receives posted; a Request waits for its
  // operation when destroyed, which would hang the failing rank instead of letting it
  // exit (mpirun then ends the job): those are let go unfinished.
  ~FusedScoring() {
    for (auto& r : posted_) {
      if (r.active() && !r.test()) new comm::Request(std::move(r));  // NOLINT: deliberately leaked
    }
    for (auto& out : outbox_) {
      if (out.request.active() && !out.request.test()) new comm::Request(std::move(out.request));  // NOLINT
    }
  }
};

}  // namespace

SplitCommandLine split_at_double_dash(int argc, char** argv) {
  SplitCommandLine out;
  int i = 0;
  for (; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--") == 0) {
      out.fused = true;
      ++i;
      break;
    }
    out.before.push_back(argv[i]);
  }
  for (; i < argc; ++i) out.after.emplace_back(argv[i]);
  return out;
}

score::CommandOptions parse_score_options(const std::vector<std::string>& words, const std::string& command_line) {
  CLI::App app{"braid-score's options (braid-score --help), after braid-generate's --", "braid-generate ... --"};
  score::CommandOptions o;
  score::add_score_options(app, o);
  std::vector<std::string> reversed(words.rbegin(), words.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("the braid-score options after '--': {}", e.what()));
  }
  o.command_line = command_line;
  o.options_given = cli::options_given(app, {});
  return o;
}

void validate(const gen::StageOptions& g, const score::CommandOptions& s) {
  if (g.tp > 1 || s.tp > 1) {
    throw UsageError(fmt::format(
        "the fused rollout (braid-generate ... -- SCORE-OPTIONS) runs at --tp 1 only for now (got --tp {}): its "
        "board deals shards to single ranks, not to tensor-parallel groups; pipe the shards instead "
        "(mpirun ... braid-generate --tp N ... | braid-score - ...), or score them with mpirun ... braid-score --tp N",
        std::max(g.tp, s.tp)));
  }
  const auto algorithm = rl::algorithm_named(s.algorithm);
  if (algorithm && rl::grouped(algorithm->estimator) && g.shard_size % g.samples_per_prompt != 0) {
    throw UsageError(fmt::format(
        "fused scoring under --algorithm {} needs whole groups in every shard (each shard's scorer computes its "
        "groups' advantages alone): --shard-size {} is not a multiple of --samples-per-prompt {}; give --shard-size "
        "{}, or score in a pipe (braid-generate ... | braid-score - ...)",
        s.algorithm, g.shard_size, g.samples_per_prompt,
        std::max(1, g.shard_size / g.samples_per_prompt) * g.samples_per_prompt));
  }
  if (s.out_dir.empty()) throw UsageError("the braid-score options after '--' need -o DIR");
  if (s.stats == "-") throw UsageError("--stats - after '--': stdout carries the scored shards' paths; give a file");
  score::settings_from(s);
}

int run_fused_rollout(const gen::StageOptions& g, const score::CommandOptions& s, const gen::RankGroup& ranks) {
  validate(g, s);
  std::unique_ptr<comm::Communicator> world;
  if (ranks.size() > 1) world = comm::mpi_world();
  FusedScoring fused(g, s, ranks.rank(), ranks.size(), world.get());
  const gen::StageHooks hooks = fused.hooks();
  return gen::run_generate_stage(g, ranks, hooks);
}

}  // namespace braid::fuse
