#include "generate/migrate.hpp"

#include "core/error.hpp"

#include "backend/registry.hpp"
#include "comm/device_group.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <type_traits>

namespace braid::gen {
namespace {

// Handovers go between processes of one build on one kind of machine: plain host-order bytes.
class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    put(static_cast<std::uint64_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  void get(T& v) {
    need(sizeof v);
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
  }
  template <typename T>
  void get(std::vector<T>& v) {
    std::uint64_t n = 0;
    get(n);
    need(n * sizeof(T));
    v.resize(n);
    std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  void need(std::size_t n) const {
    if (in_.size() - pos_ < n) throw std::runtime_error("migration message is truncated");
  }
  const std::string& in_;
  std::size_t pos_ = 0;
};

}  // namespace

RankGroup::RankGroup(int* argc, char*** argv) {
  if (!comm::launched_by_mpi()) return;
  runtime_ = std::make_unique<comm::MpiRuntime>(argc, argv);
  world_ = comm::mpi_world();
  rank_ = world_rank_ = world_->rank();
  size_ = world_->size();
}

RankGroup::~RankGroup() = default;

void RankGroup::split_tp(int tp, const std::string& device) {
  if (!world_) {
    if (tp != 1) {
      throw UsageError(fmt::format("--tp {} splits the model over {} ranks: start them with mpirun -np {} (or a "
                                   "multiple of {})", tp, tp, tp, tp));
    }
    return;
  }
  if (tp > 1) {
    const backend::BackendSpec spec = backend::parse_device_option(device);
    if (spec.kind == backend::DeviceKind::cuda) {
      if (const std::string why = backend::cuda_unavailable_reason(); !why.empty())
        throw UsageError(fmt::format("--device {}: {}", spec.to_string(), why));
      gpus_ = comm::cuda_group(*world_, spec.device);
    }
  }
  mesh_ = std::make_unique<comm::Mesh>(gpus_ ? *gpus_ : *world_, tp);
  rank_ = mesh_->device();
  size_ = mesh_->devices();
  tp_rank_ = mesh_->tp_rank();
  tp_size_ = mesh_->tp_size();
}

comm::Communicator* RankGroup::tp_group() const { return mesh_ ? mesh_->tp_group() : nullptr; }

comm::Communicator* RankGroup::devices() const {
  if (size_ == 1) return nullptr;
  return mesh_ ? mesh_->cross_group() : world_.get();
}

std::string RankGroup::who() const {
  if (world_size() == 1) return "";
  if (tp_size_ == 1) return fmt::format("rank {}: ", rank_);
  return fmt::format("device {} tp {}: ", rank_, tp_rank_);
}

namespace {

constexpr int kTagGather = 4;

}  // namespace

// Point to point rather than an all-gather collective (whose wait spins): a rank that reaches
// the exchange first sleeps (comm::wait_asleep) and leaves its core to the peers it waits for. Rounds pair
// up because messages between two ranks with one tag keep their order.
std::vector<std::int64_t> RankGroup::allgather(std::int64_t value) const {
  std::vector<std::int64_t> all(static_cast<std::size_t>(size_), value);
  comm::Communicator* group = devices();
  if (!group) return all;
  std::vector<comm::Request> pending;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    pending.push_back(group->isend(std::span<const std::int64_t>(&value, 1), r, kTagGather));
    pending.push_back(group->irecv(std::span<std::int64_t>(&all[static_cast<std::size_t>(r)], 1), r, kTagGather));
  }
  for (auto& p : pending) comm::wait_asleep(p);
  return all;
}

// A length, then the bytes: the receiver learns the size before it takes them.
void RankGroup::send(int to, int tag, const std::string& bytes) const {
  comm::Communicator* group = devices();
  if (!group) throw std::logic_error("RankGroup::send with one device");
  const std::int64_t n = static_cast<std::int64_t>(bytes.size());
  comm::Request size = group->isend(std::span<const std::int64_t>(&n, 1), to, tag);
  comm::Request data = group->isend(std::span<const char>(bytes.data(), bytes.size()), to, tag);
  comm::wait_asleep(size);
  comm::wait_asleep(data);
}

std::string RankGroup::recv(int from, int tag) const {
  comm::Communicator* group = devices();
  if (!group) throw std::logic_error("RankGroup::recv with one device");
  std::int64_t n = 0;
  group->recv(std::span<std::int64_t>(&n, 1), from, tag);
  std::string bytes(static_cast<std::size_t>(n), '\0');
  group->recv(std::span<char>(bytes.data(), bytes.size()), from, tag);
  return bytes;
}

void RankGroup::broadcast(std::string& text) const {
  if (world_) world_->broadcast(text, 0);
}

void RankGroup::finish(int last) const {
  if (comm::Communicator* group = devices()) comm::release_from(*group, last, kTagDone);
}

double parse_migrate_threshold(const std::string& text, std::int64_t samples) {
  if (text.empty() || text == "off" || text == "0") return 0;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool fraction = text.find_first_of(".eE") != std::string::npos;
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0 ||
      (fraction && v > 1) || (!fraction && v != std::floor(v))) {
    throw UsageError(fmt::format(
        "--migrate-threshold must be a sample count (12) or a fraction of the samples in (0, 1] (0.2), got '{}'", text));
  }
  return fraction ? v * static_cast<double>(samples) : v;
}

MigrationDecision decide_migration(std::span<const std::int64_t> remaining, double threshold, int migrate_to) {
  MigrationDecision d;
  d.remaining = std::accumulate(remaining.begin(), remaining.end(), std::int64_t{0});
  const int ranks = static_cast<int>(remaining.size());
  if (threshold <= 0 || migrate_to >= ranks || d.remaining == 0 || static_cast<double>(d.remaining) >= threshold) {
    return d;
  }
  std::vector<int> order(static_cast<std::size_t>(ranks));
  std::iota(order.begin(), order.end(), 0);
  // The ranks with the most samples left keep theirs: the least moved (RLHFuse §4.2).
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return remaining[static_cast<std::size_t>(a)] > remaining[static_cast<std::size_t>(b)]; });
  d.receivers.assign(order.begin(), order.begin() + migrate_to);
  d.now = true;
  return d;
}

std::string pack(const Handover& h) {
  Writer w;
  w.put(h.shards);
  w.put(static_cast<std::uint64_t>(h.finished.size()));
  for (const Sample& s : h.finished) {
    w.put(s.sample_id);
    w.put(s.prompt);
    w.put(s.response);
    w.put(s.logprobs);
    w.put(s.raw_logprobs);
    w.put(static_cast<std::int32_t>(s.finish));
  }
  w.put(static_cast<std::uint64_t>(h.unfinished.size()));
  for (const Prompt& p : h.unfinished) {
    w.put(p.sample_id);
    w.put(p.tokens);
    w.put(p.response);
    w.put(p.logprobs);
    w.put(p.raw_logprobs);
  }
  return w.take();
}

Handover unpack(const std::string& bytes) {
  Handover h;
  Reader r(bytes);
  r.get(h.shards);
  std::uint64_t n = 0;
  r.get(n);
  h.finished.resize(n);
  for (Sample& s : h.finished) {
    std::int32_t finish = 0;
    r.get(s.sample_id);
    r.get(s.prompt);
    r.get(s.response);
    r.get(s.logprobs);
    r.get(s.raw_logprobs);
    r.get(finish);
    s.finish = static_cast<FinishReason>(finish);
  }
  r.get(n);
  h.unfinished.resize(n);
  for (Prompt& p : h.unfinished) {
    r.get(p.sample_id);
    r.get(p.tokens);
    r.get(p.response);
    r.get(p.logprobs);
    r.get(p.raw_logprobs);
  }
  if (!r.done()) throw std::runtime_error("migration message has trailing bytes");
  return h;
}

}  // namespace braid::gen
