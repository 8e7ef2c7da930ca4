#include "comm/communicator.hpp"

#include <algorithm>

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

}  // namespace braid::comm
