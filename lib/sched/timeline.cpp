#include "sched/timeline.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace braid::sched {

Timeline::Timeline(const Problem& p, const Order& order)
    : p_(p),
      per_device_(p.per_device),
      cap_(p.spec.mem_capacity.value_or(std::numeric_limits<double>::infinity()) * (1 + 1e-12)),
      order_(order) {
  const Timing t = evaluate(p, order);
  if (!t.valid) throw std::logic_error("Timeline needs a valid schedule: " + t.problem);
  const auto n = static_cast<std::size_t>(p.num_tasks);
  start_ = t.start;
  end_ = t.end;
  pos_.assign(n, 0);
  level_.assign(n, 0);
  for (int d = 0; d < p.devices; ++d) {
    double level = 0;
    for (int i = 0; i < per_device_; ++i) {
      const auto k = static_cast<std::size_t>(d * per_device_ + i);
      pos_[static_cast<std::size_t>(order_[k])] = i;
      level += p.mem_delta[static_cast<std::size_t>(order_[k])];
      level_[k] = level;
    }
  }
  link_.resize(n);
  for (std::size_t task = 0; task < n; ++task) {
    const int i = pos_[task], d = p.device[task];
    link_[task] = {i > 0 ? order_[slot(d, i - 1)] : -1, i + 1 < per_device_ ? order_[slot(d, i + 1)] : -1,
                   p.pred[task], p.succ[task], p.dur[task], p.lag[task]};
  }
  // Start times order the graph topologically; ties have no edge between them.
  at_ord_.resize(n);
  for (std::size_t i = 0; i < n; ++i) at_ord_[i] = static_cast<std::int32_t>(i);
  std::stable_sort(at_ord_.begin(), at_ord_.end(),
                   [&](std::int32_t x, std::int32_t y) { return start_[static_cast<std::size_t>(x)] < start_[static_cast<std::size_t>(y)]; });
  ord_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) ord_[static_cast<std::size_t>(at_ord_[i])] = static_cast<std::int32_t>(i);
  q_.assign(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    const std::int32_t w = at_ord_[i];
    q_[static_cast<std::size_t>(w)] = compute_q(w);
  }
  mark_.assign(n, 0);
  moved_device_.assign(static_cast<std::size_t>(p.devices), 0);
  dirty_.assign((n + 63) / 64, 0);
  for (double e : end_) end_sum_ += e;
  critical_.assign(n, 0);
  critical_makespan_ = makespan();
  for (std::size_t task = 0; task < n; ++task) {
    critical_[task] = is_critical(task, critical_makespan_) ? 1 : 0;
    critical_count_ += critical_[task];
  }
  for (int d = 0; d < p.devices; ++d) {
    finish_sum_ += finish(d);
  }
}

double Timeline::makespan() const {
  double m = 0;
  for (int d = 0; d < p_.devices; ++d) {
    m = std::max(m, finish(d));
  }
  return m;
}

bool Timeline::is_critical(std::size_t t, double makespan) const {
  return start_[t] + q_[t] >= makespan - 1e-9 * std::max(1.0, makespan);
}

// After a kept swap: only subtasks whose start or q moved can change their flag,
// unless the makespan moved (then every flag is recomputed).
void Timeline::refresh_critical() {
  if (!track_critical_) return;  // begin_move() saved the count and cleared the log
  const double m = makespan();
  auto check = [&](std::int32_t t) {
    const auto ti = static_cast<std::size_t>(t);
    const std::uint8_t now = is_critical(ti, m) ? 1 : 0;
    if (now == critical_[ti]) return;
    critical_log_.push_back(t);
    critical_count_ += now ? 1 : -1;
    critical_[ti] = now;
  };
  if (m != critical_makespan_) {
    critical_makespan_ = m;
    for (std::size_t t = 0; t < critical_.size(); ++t) check(static_cast<std::int32_t>(t));
    return;
  }
  for (const Saved& e : log_) check(e.task);
  for (const SavedQ& e : q_log_) check(e.task);
}

double Timeline::device_peak(int d) const {
  const auto first = level_.begin() + static_cast<std::ptrdiff_t>(d) * per_device_;
  return std::max(0.0, *std::max_element(first, first + per_device_));
}

double Timeline::device_excess(int d, double level) const {
  double sum = 0;
  const std::size_t first = static_cast<std::size_t>(d) * static_cast<std::size_t>(per_device_);
  for (std::size_t k = first; k < first + static_cast<std::size_t>(per_device_); ++k) sum += std::max(0.0, level_[k] - level);
  return sum;
}

inline double Timeline::start_after(std::int32_t t, double device_free) const {
  const Link& l = link_[static_cast<std::size_t>(t)];
  return l.pred >= 0 ? std::max(device_free, end_[static_cast<std::size_t>(l.pred)] + l.lag) : device_free;
}

inline double Timeline::q_before(std::int32_t t, double device_rest) const {
  const Link& l = link_[static_cast<std::size_t>(t)];
  double rest = device_rest;
  if (l.succ >= 0) rest = std::max(rest, q_[static_cast<std::size_t>(l.succ)] + link_[static_cast<std::size_t>(l.succ)].lag);
  return l.dur + rest;
}

inline double Timeline::compute_start(std::int32_t t) const {
  const std::int32_t prev = link_[static_cast<std::size_t>(t)].prev;
  return start_after(t, prev >= 0 ? end_[static_cast<std::size_t>(prev)] : 0.0);
}

inline double Timeline::compute_q(std::int32_t t) const {
  const std::int32_t next = link_[static_cast<std::size_t>(t)].next;
  return q_before(t, next >= 0 ? q_[static_cast<std::size_t>(next)] : 0.0);
}

bool Timeline::swappable(std::int32_t a, std::int32_t b, double new_level) const {
  const auto ai = static_cast<std::size_t>(a), bi = static_cast<std::size_t>(b);
  // Micro-batches of one model pass a stage in order: such swaps only relabel.
  return p_.pred[bi] != a && !(p_.model[ai] == p_.model[bi] && p_.kind[ai] == p_.kind[bi]) && new_level <= cap_;
}

inline void Timeline::mark_dirty(std::int32_t t) {
  const auto o = static_cast<std::size_t>(ord_[static_cast<std::size_t>(t)]);
  dirty_[o >> 6] |= std::uint64_t{1} << (o & 63);
  dirty_lo_ = std::min(dirty_lo_, o >> 6);
  dirty_hi_ = std::max(dirty_hi_, o >> 6);
}

void Timeline::set_ord(std::int32_t t, std::int32_t o) {
  ord_log_.push_back({t, ord_[static_cast<std::size_t>(t)]});
  ord_[static_cast<std::size_t>(t)] = o;
  at_ord_[static_cast<std::size_t>(o)] = t;
}

void Timeline::apply_swap(int d, int i) {
  const std::size_t k = slot(d, i);
  const std::int32_t a = order_[k], b = order_[k + 1];
  order_[k] = b;
  order_[k + 1] = a;
  pos_[static_cast<std::size_t>(b)] = i;
  pos_[static_cast<std::size_t>(a)] = i + 1;
  Link &la = link_[static_cast<std::size_t>(a)], &lb = link_[static_cast<std::size_t>(b)];
  const std::int32_t x = la.prev, y = lb.next;
  lb.prev = x;
  lb.next = a;
  la.prev = b;
  la.next = y;
  if (x >= 0) link_[static_cast<std::size_t>(x)].next = b;
  if (y >= 0) link_[static_cast<std::size_t>(y)].prev = a;
}

void Timeline::begin_move() {
  log_.clear();
  q_log_.clear();
  ord_log_.clear();
  swap_log_.clear();
  critical_log_.clear();
  saved_critical_count_ = critical_count_;
  saved_critical_makespan_ = critical_makespan_;
  saved_end_sum_ = end_sum_;
  saved_finish_sum_ = finish_sum_;
}

bool Timeline::collect_descendants(std::int32_t a, std::int32_t b) {
  if (++epoch_ == 0) {  // wrapped: clear the stamps once every 2^32 swaps
    std::fill(mark_.begin(), mark_.end(), 0);
    epoch_ = 1;
  }
  const auto ai = static_cast<std::size_t>(a);
  const std::int32_t pred_b = p_.pred[static_cast<std::size_t>(b)];
  const std::int32_t ord_b = ord_[static_cast<std::size_t>(b)];
  forward_.clear();
  forward_.push_back(a);
  mark_[ai] = epoch_;
  stack_.clear();
  if (const std::int32_t s = p_.succ[ai]; s >= 0 && ord_[static_cast<std::size_t>(s)] < ord_b) stack_.push_back(s);
  while (!stack_.empty()) {
    const std::int32_t w = stack_.back();
    stack_.pop_back();
    const auto wi = static_cast<std::size_t>(w);
    if (mark_[wi] == epoch_) continue;
    if (w == pred_b) return false;
    mark_[wi] = epoch_;
    forward_.push_back(w);
    const Link& l = link_[wi];
    if (l.succ >= 0 && ord_[static_cast<std::size_t>(l.succ)] < ord_b) stack_.push_back(l.succ);
    if (const std::int32_t nx = l.next; nx >= 0 && ord_[static_cast<std::size_t>(nx)] < ord_b) stack_.push_back(nx);
  }
  return true;
}

void Timeline::reorder(std::int32_t a, std::int32_t b) {
  const auto bi = static_cast<std::size_t>(b);
  const std::int32_t ord_a = ord_[static_cast<std::size_t>(a)], ord_b = ord_[bi];
  const std::int32_t pred_b = p_.pred[bi];
  backward_.clear();
  backward_.push_back(b);
  mark_[bi] = epoch_;
  if (pred_b >= 0 && ord_[static_cast<std::size_t>(pred_b)] > ord_a) stack_.push_back(pred_b);
  while (!stack_.empty()) {
    const std::int32_t w = stack_.back();
    stack_.pop_back();
    const auto wi = static_cast<std::size_t>(w);
    if (mark_[wi] == epoch_) continue;
    mark_[wi] = epoch_;
    backward_.push_back(w);
    const Link& l = link_[wi];
    if (l.pred >= 0 && ord_[static_cast<std::size_t>(l.pred)] > ord_a) stack_.push_back(l.pred);
    if (const std::int32_t pv = l.prev; pv >= 0 && ord_[static_cast<std::size_t>(pv)] > ord_a) stack_.push_back(pv);
  }
  // Reuse the slots of both sets: ancestors of b first, then descendants of a.
  if (backward_.size() == 1 && forward_.size() == 1) {
    set_ord(b, ord_a);
    set_ord(a, ord_b);
    return;
  }
  auto by_ord = [&](std::int32_t x, std::int32_t z) { return ord_[static_cast<std::size_t>(x)] < ord_[static_cast<std::size_t>(z)]; };
  slots_.clear();
  for (std::int32_t w : backward_) slots_.push_back(ord_[static_cast<std::size_t>(w)]);
  for (std::int32_t w : forward_) slots_.push_back(ord_[static_cast<std::size_t>(w)]);
  std::sort(slots_.begin(), slots_.end());
  std::sort(backward_.begin(), backward_.end(), by_ord);
  std::sort(forward_.begin(), forward_.end(), by_ord);
  std::size_t s = 0;
  for (std::int32_t w : backward_) set_ord(w, slots_[s++]);
  for (std::int32_t w : forward_) set_ord(w, slots_[s++]);
}

void Timeline::commit_swap(int d, int i, double new_level) {
  const std::size_t k = slot(d, i);
  swap_log_.push_back({d, i, level_[k]});
  apply_swap(d, i);
  level_[k] = new_level;
}

bool Timeline::push_forward(std::size_t from_ord, double threshold, std::int32_t skip_a, std::int32_t skip_b,
                            std::size_t trusted_from) {
  std::size_t word = from_ord >> 6;
  while (word <= dirty_hi_) {
    const std::uint64_t bits = dirty_[word];
    if (bits == 0) {
      ++word;
      continue;
    }
    dirty_[word] = bits & (bits - 1);
    const std::int32_t w = at_ord_[(word << 6) + static_cast<std::size_t>(std::countr_zero(bits))];
    const auto wi = static_cast<std::size_t>(w);
    const double s = compute_start(w);
    if (s == start_[wi]) continue;
    const Link& l = link_[wi];
    log_.push_back({w, start_[wi], end_[wi]});
    start_[wi] = s;
    end_sum_ -= end_[wi];
    end_[wi] = s + l.dur;
    end_sum_ += end_[wi];
    // Another device's last subtask moving moves that device's finish; a swapped
    // device's is taken by the caller (its last subtask may be a different one now).
    if (l.next < 0 && moved_device_[static_cast<std::size_t>(p_.device[wi])] == 0) {
      finish_sum_ += end_[wi] - log_.back().end;
    }
    if (w != skip_a && w != skip_b && (word << 6) >= trusted_from && s + q_[wi] > threshold) {
      for (std::size_t rest = word; rest <= dirty_hi_; ++rest) dirty_[rest] = 0;
      clear_dirty_range();
      return false;
    }
    if (l.succ >= 0) mark_dirty(l.succ);
    if (l.next >= 0) mark_dirty(l.next);
  }
  clear_dirty_range();
  return true;
}

SwapResult Timeline::swap(int d, int i, double threshold) {
  const std::size_t k = slot(d, i);
  const std::int32_t a = order_[k];
  const std::int32_t b = order_[k + 1];
  const double new_level = (i > 0 ? level_[k - 1] : 0.0) + p_.mem_delta[static_cast<std::size_t>(b)];
  if (!swappable(a, b, new_level)) return SwapResult::invalid;

  // (1) Descendants of a placed before b: they must move after b. Meeting b's
  // data predecessor there means b→a would close a cycle.
  if (!collect_descendants(a, b)) return SwapResult::invalid;

  // (2) Exact bounds through b and a before touching anything: their new
  // starts depend on unchanged subtasks, their new q on unchanged ones below.
  const std::int32_t x = link_[static_cast<std::size_t>(a)].prev, y = link_[static_cast<std::size_t>(b)].next;
  const double qa = q_before(a, y >= 0 ? q_[static_cast<std::size_t>(y)] : 0.0);
  const double qb = q_before(b, qa);
  const double sb = start_after(b, x >= 0 ? end_[static_cast<std::size_t>(x)] : 0.0);
  if (sb + qb > threshold) return SwapResult::too_slow;
  const double sa = start_after(a, sb + link_[static_cast<std::size_t>(b)].dur);
  if (sa + qa > threshold) return SwapResult::too_slow;

  // (3) Ancestors of b placed after a: they must move before a; (4) the swap itself.
  begin_move();
  reorder(a, b);
  const double finish_d_before = finish(d);
  commit_swap(d, i, new_level);

  // (5) Push new times forward in topological order, stopping where nothing moves.
  // q of a and b is still the old one there; their bounds were checked above.
  mark_dirty(b);
  mark_dirty(a);
  if (y >= 0) mark_dirty(y);  // its device predecessor is now a
  moved_device_[static_cast<std::size_t>(d)] = 1;
  const bool in_time = push_forward(static_cast<std::size_t>(ord_[static_cast<std::size_t>(b)]), threshold, a, b, 0);
  moved_device_[static_cast<std::size_t>(d)] = 0;
  // Paths that avoid the swap keep their length; they bind when the caller's
  // threshold lies below the current makespan.
  if (!in_time || makespan() > threshold) {
    restore();
    return SwapResult::too_slow;
  }
  finish_sum_ += finish(d) - finish_d_before;
  update_q(a, b, qa, qb);
  refresh_critical();
  return SwapResult::done;
}

SwapResult Timeline::swap_all(const std::vector<std::pair<int, int>>& swaps, double threshold) {
  if (swaps.size() == 1) return swap(swaps[0].first, swaps[0].second, threshold);
  begin_move();
  finish_before_.clear();
  auto refuse = [&](SwapResult r) {
    for (const auto& [d, f] : finish_before_) moved_device_[static_cast<std::size_t>(d)] = 0;
    restore();
    return r;
  };
  // The order, swap by swap (each must be valid in its turn).
  for (const auto& [d, i] : swaps) {
    const std::size_t k = slot(d, i);
    const std::int32_t a = order_[k], b = order_[k + 1];
    const double new_level = (i > 0 ? level_[k - 1] : 0.0) + p_.mem_delta[static_cast<std::size_t>(b)];
    if (!swappable(a, b, new_level) || !collect_descendants(a, b)) return refuse(SwapResult::invalid);
    reorder(a, b);
    if (moved_device_[static_cast<std::size_t>(d)] == 0) {
      moved_device_[static_cast<std::size_t>(d)] = 1;
      finish_before_.push_back({d, finish(d)});
    }
    commit_swap(d, i, new_level);
  }
  // The times first, in one forward pass from every swapped position (a subtask
  // whose device predecessor changed sits on or just after one). q is stale for
  // the swapped subtasks' ancestors, which all lie below the highest of them in the
  // topological order: above it (from the next 64-subtask word of the scan on) q
  // holds and the pass refuses early; below, only the makespan at its end decides.
  std::size_t bottom = dirty_.size() * 64, highest = 0;
  for (const SavedSwap& sw : swap_log_) {
    const std::size_t k = slot(sw.d, sw.i);
    highest = std::max({highest, static_cast<std::size_t>(ord_[static_cast<std::size_t>(order_[k])]),
                        static_cast<std::size_t>(ord_[static_cast<std::size_t>(order_[k + 1])])});
    const std::size_t last = std::min(k + 2, slot(sw.d, per_device_ - 1));
    for (std::size_t j = k; j <= last; ++j) {
      mark_dirty(order_[j]);
      bottom = std::min(bottom, static_cast<std::size_t>(ord_[static_cast<std::size_t>(order_[j])]));
    }
  }
  if (!push_forward(bottom, threshold, -1, -1, (highest | 63) + 1) || makespan() > threshold) {
    return refuse(SwapResult::too_slow);
  }
  // Then q, for the kept move only: a subtask whose device successor changed sits,
  // after all the swaps, on or next to a swapped position.
  std::size_t top = 0;
  for (const SavedSwap& sw : swap_log_) {
    const std::size_t k = slot(sw.d, sw.i);
    for (std::size_t j = sw.i > 0 ? k - 1 : k; j <= k + 1; ++j) {
      mark_dirty(order_[j]);
      top = std::max(top, static_cast<std::size_t>(ord_[static_cast<std::size_t>(order_[j])]));
    }
  }
  propagate_q(top);
  for (const auto& [d, f] : finish_before_) {
    finish_sum_ += finish(d) - f;
    moved_device_[static_cast<std::size_t>(d)] = 0;
  }
  refresh_critical();
  return SwapResult::done;
}

inline void Timeline::mark_preds(std::int32_t t) {
  const Link& l = link_[static_cast<std::size_t>(t)];
  if (l.pred >= 0) mark_dirty(l.pred);
  if (l.prev >= 0) mark_dirty(l.prev);
}

void Timeline::set_q(std::int32_t t, double v) {
  q_log_.push_back({t, q_[static_cast<std::size_t>(t)]});
  q_[static_cast<std::size_t>(t)] = v;
}

// Walks the marked subtasks and their ancestors backwards in topological order from
// `top`, stopping where a value comes out unchanged.
void Timeline::propagate_q(std::size_t top) {
  std::size_t word = top >> 6;
  for (;;) {
    const std::uint64_t bits = dirty_[word];
    if (bits == 0) {
      if (word <= dirty_lo_) break;
      --word;
      continue;
    }
    const int bit = 63 - std::countl_zero(bits);
    dirty_[word] = bits & ~(std::uint64_t{1} << bit);
    const std::int32_t w = at_ord_[(word << 6) + static_cast<std::size_t>(bit)];
    const double v = compute_q(w);
    if (v == q_[static_cast<std::size_t>(w)]) continue;
    set_q(w, v);
    mark_preds(w);
  }
  clear_dirty_range();
}

// q changes only for a, b and their ancestors.
void Timeline::update_q(std::int32_t a, std::int32_t b, double qa, double qb) {
  set_q(a, qa);
  set_q(b, qb);
  if (const std::int32_t pa = p_.pred[static_cast<std::size_t>(a)]; pa >= 0) mark_dirty(pa);
  mark_preds(b);
  propagate_q(static_cast<std::size_t>(ord_[static_cast<std::size_t>(a)]));
}

void Timeline::restore() {
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    start_[static_cast<std::size_t>(it->task)] = it->start;
    end_[static_cast<std::size_t>(it->task)] = it->end;
  }
  log_.clear();
  for (auto it = q_log_.rbegin(); it != q_log_.rend(); ++it) q_[static_cast<std::size_t>(it->task)] = it->q;
  q_log_.clear();
  for (auto it = ord_log_.rbegin(); it != ord_log_.rend(); ++it) {
    ord_[static_cast<std::size_t>(it->task)] = it->ord;
    at_ord_[static_cast<std::size_t>(it->ord)] = it->task;
  }
  ord_log_.clear();
  end_sum_ = saved_end_sum_;
  finish_sum_ = saved_finish_sum_;
  for (std::int32_t t : critical_log_) critical_[static_cast<std::size_t>(t)] ^= 1;
  critical_log_.clear();
  critical_count_ = saved_critical_count_;
  critical_makespan_ = saved_critical_makespan_;
  for (auto it = swap_log_.rbegin(); it != swap_log_.rend(); ++it) {
    apply_swap(it->d, it->i);
    level_[slot(it->d, it->i)] = it->level;
  }
  swap_log_.clear();
}

void Timeline::undo() { restore(); }

bool ChainMove::plan(const Timeline& tl, std::int32_t t, int dir) {
  const auto ti = static_cast<std::size_t>(t);
  const int m = p_.model[ti], r = p_.replica[ti], j = p_.micro_batch[ti];
  const Kind k = p_.kind[ti];
  const int stages = p_.spec.models[static_cast<std::size_t>(m)].stages;
  moves_.clear();
  for (int s = 0; s < stages; ++s) {
    const std::int32_t c = p_.task_id(m, r, s, j, k);
    const int d = p_.device[static_cast<std::size_t>(c)];
    const int other = tl.position(c) + dir;
    if (other < 0 || other >= p_.per_device) continue;
    const auto x = static_cast<std::size_t>(tl.order()[static_cast<std::size_t>(d * p_.per_device + other)]);
    if (p_.model[x] == m && p_.kind[x] == k) continue;
    moves_.push_back({d, std::min(other, other - dir)});
  }
  // Swapped in the order the data flows when the chain moves earlier (a member's
  // input has moved before it does), against it when the chain moves later, so
  // that no state on the way closes a cycle that the whole move does not.
  if ((k == Kind::F) != (dir < 0)) std::reverse(moves_.begin(), moves_.end());
  return moves_.size() >= 2;
}


}  // namespace braid::sched
