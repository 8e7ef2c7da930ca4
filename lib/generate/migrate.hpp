// Several braid-generate processes (mpirun) and the long-tail migration between them
// (RLHFuse §4.2). The processes talk through lib/comm's Communicator.
//
// Migration: while generating, the ranks exchange their counts of unfinished samples
// after every step. When fewer than R_t remain over all ranks, the m ranks with the
// most left (ties: the lower rank) become receivers; every other rank stops, hands
// each of its open shards whole (finished samples, and the unfinished ones as
// continuations: prompt, tokens so far, logprobs so far) to receiver[shard % m], and
// is done. Receivers continue everything (their own unfinished samples too) in a new
// run that prefills prompt + partial response; the sampler state is recomputed from
// (seed, sample_id, tokens so far) (sampler.hpp), so the continuation samples what
// the uninterrupted run would have.
#pragma once

#include "generate/generate.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::comm {
class Communicator;
class Mesh;
class MpiRuntime;
}  // namespace braid::comm

namespace braid::gen {

// Every rank of the job when the process was started by an MPI launcher, else one rank
// and no MPI at all (so a plain run never pays for MPI start-up).
//
// With tensor parallelism (split_tp) the unit of work is a device, a tp group of ranks
// that generate the same samples with the model split across them (comm/mesh.hpp):
// rank() and size() then count devices, and allgather, send, recv and finish run over
// the cross group (the ranks of this tp_rank, one per device), so each tp rank talks
// to the same tp rank of another device and the shard deal and the migration are
// those of `size()` devices. broadcast stays over every rank.
class RankGroup {
 public:
  RankGroup(int* argc, char*** argv);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  // Collective over every rank: lays them out as devices x tp (comm::Mesh). UsageError
  // when tp does not divide the ranks. Call once, before any other exchange. On a GPU
  // (`device` cuda[:N]) with tp > 1 the tp groups take device buffers
  // (comm/device_group.hpp: NCCL, or staged over MPI).
  void split_tp(int tp, const std::string& device = "cpu");

  int rank() const { return rank_; }    // this device
  int size() const { return size_; }    // devices
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }
  comm::Communicator* tp_group() const;  // nullptr at tp 1
  int world_rank() const { return world_rank_; }
  int world_size() const { return size_ * tp_size_; }
  // "rank 3: " (device 1, tp rank 1 at tp 2: "device 1 tp 1: "), "" for one process.
  std::string who() const;

  // Every rank's value, by rank (collective; waits asleep, not spinning).
  std::vector<std::int64_t> allgather(std::int64_t value) const;
  // Point to point bytes of any length; send waits asleep, not spinning, for the peer.
  void send(int to, int tag, const std::string& bytes) const;
  std::string recv(int from, int tag) const;
  // Rank 0's text on every rank (collective).
  void broadcast(std::string& text) const;
  // The end of a run. Rank `last` (the one that finishes last) lets the others go;
  // they wait for it asleep (polling every millisecond), not in MPI's finalisation,
  // whose wait spins: a rank that is done (a migration sender) frees its core at once.
  void finish(int last) const;

 private:
  comm::Communicator* devices() const;   // the cross group (the world at tp 1); nullptr for one device

  std::unique_ptr<comm::MpiRuntime> runtime_;
  std::unique_ptr<comm::Communicator> world_;
  std::unique_ptr<comm::Communicator> gpus_;   // world_ taking device buffers (split_tp on a GPU)
  std::unique_ptr<comm::Mesh> mesh_;
  int rank_ = 0;
  int size_ = 1;
  int tp_rank_ = 0;
  int tp_size_ = 1;
  int world_rank_ = 0;
};

// --migrate-threshold: a count ("12") or a fraction of the run's samples ("0.2").
// Returns R_t for `samples` samples; 0 = migration off. UsageError when malformed.
double parse_migrate_threshold(const std::string& text, std::int64_t samples);

struct MigrationDecision {
  bool now = false;
  std::int64_t remaining = 0;   // over all ranks
  std::vector<int> receivers;   // m ranks, the most remaining first
};
// From every rank's count of unfinished samples: migrate when 0 < sum < threshold.
MigrationDecision decide_migration(std::span<const std::int64_t> remaining, double threshold, int migrate_to);

// What a sending rank hands one receiver.
struct Handover {
  std::vector<std::int64_t> shards;  // the shards that now belong to the receiver
  std::vector<Sample> finished;      // their finished samples
  std::vector<Prompt> unfinished;    // their unfinished samples, as continuations
};
std::string pack(const Handover& h);
Handover unpack(const std::string& bytes);

// Message tags of the stage.
inline constexpr int kTagHandover = 1;
inline constexpr int kTagStats = 2;
inline constexpr int kTagDone = 3;

}  // namespace braid::gen
