#include "comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <stdexcept>
#include <string>
#include <thread>

namespace braid::comm {

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (op_) op_->wait();
    op_ = std::move(o.op_);
  }
  return *this;
}

Request::~Request() {
  // A destructor must not throw; a failing wait here means the job is going down anyway.
  try {
    if (op_) op_->wait();
  } catch (...) {
  }
}

void Request::wait() {
  if (!op_) return;
  op_->wait();
  op_.reset();
}

bool Request::test() {
  if (!op_) return true;
  if (!op_->test()) return false;
  op_.reset();
  return true;
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

void PendingOp::wait_asleep() {
  for (int spin = 0; spin < 64; ++spin) {
    if (test()) return;
  }
  while (!test()) std::this_thread::sleep_for(std::chrono::microseconds(500));
}

void Request::wait_asleep() {
  if (!op_) return;
  op_->wait_asleep();
  op_.reset();
}

void wait_asleep(Request& r) { r.wait_asleep(); }

void Communicator::broadcast(std::string& text, int root) {
  std::int64_t n = static_cast<std::int64_t>(text.size());
  broadcast(std::span<std::int64_t>(&n, 1), root);
  text.resize(static_cast<std::size_t>(n));
  broadcast_bytes(text.data(), text.size(), root);
}

std::unique_ptr<Communicator> Communicator::group(std::span<const int> ranks) {
  const auto it = std::find(ranks.begin(), ranks.end(), rank());
  if (it == ranks.end()) return split(-1, 0);
  return split(0, static_cast<int>(it - ranks.begin()));
}

void Communicator::throw_size_mismatch(const char* what, std::size_t parts, std::size_t buffer) {
  throw std::invalid_argument(std::string(what) + ": the parts hold " + std::to_string(parts) +
                              " elements, the buffer " + std::to_string(buffer));
}

void all_reduce_bucketed(Communicator& comm, std::span<float> data, std::size_t bucket_elements,
                         std::size_t in_flight) {
  if (bucket_elements == 0) bucket_elements = std::max<std::size_t>(data.size(), 1);
  in_flight = std::max<std::size_t>(in_flight, 1);
  std::deque<Request> pending;
  for (std::size_t first = 0; first < data.size(); first += bucket_elements) {
    if (pending.size() == in_flight) {
      pending.front().wait();
      pending.pop_front();
    }
    const std::size_t n = std::min(bucket_elements, data.size() - first);
    pending.push_back(comm.iall_reduce_elements(data.data() + first, n, DataType::f32, ReduceOp::sum));
  }
  for (Request& r : pending) r.wait();
}

void release_from(Communicator& comm, int root, int tag) {
  std::int64_t token = 0;
  if (comm.rank() == root) {
    for (int r = 0; r < comm.size(); ++r) {
      if (r != root) comm.send(std::span<const std::int64_t>(&token, 1), r, tag);
    }
    return;
  }
  Request done = comm.irecv(std::span<std::int64_t>(&token, 1), root, tag);
  wait_asleep(done);
}

}  // namespace braid::comm
