#include "eval/synth.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/limits.hpp"

namespace braid::eval {
namespace {

// The verifier compares numbers of up to 18 significant digits (score/math_answer.hpp).
constexpr int kMaxAnswerDigits = 18;

// Streams of Rng(seed, stream) per file, so that one count does not move another file's items.
constexpr std::uint64_t kPromptStream = 1, kSftStream = 2, kPairStream = 3, kHeldoutStream = 4;
constexpr std::uint64_t kCorruptStream = 1000;

char digit(Rng& rng) { return static_cast<char>('1' + rng.below(9)); }

std::string digits_of(Rng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += digit(rng);
  return s;
}

// n in [lo, hi] with P(n >= k) proportional to (lo / k)^tail: a Pareto draw, redrawn while above hi.
int pareto_length(Rng& rng, int lo, int hi, double tail) {
  for (;;) {
    const double u = 1.0 - rng.uniform();  // (0, 1]
    const double x = static_cast<double>(lo) * std::pow(u, -1.0 / tail);
    if (x < static_cast<double>(hi) + 1.0) return std::clamp(static_cast<int>(std::floor(x)), lo, hi);
  }
}

// a + b of two digit strings, as a digit string.
std::string add_strings(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()) || carry != 0; ++i) {
    int s = carry;
    if (i < a.size()) s += a[a.size() - 1 - i] - '0';
    if (i < b.size()) s += b[b.size() - 1 - i] - '0';
    out += static_cast<char>('0' + s % 10);
    carry = s / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

SynthItem make_item(SynthTask task, const SynthOptions& o, Rng& rng) {
  SynthItem item;
  item.task = task;
  item.digits = pareto_length(rng, o.min_digits, o.max_digits, o.tail);
  const std::string a = digits_of(rng, item.digits);
  switch (task) {
    case SynthTask::sort:
      item.prompt = "sort " + a + "=";
      item.answer = a;
      std::sort(item.answer.begin(), item.answer.end(), std::greater<>());
      break;
    case SynthTask::reverse:
      item.prompt = "rev " + a + "=";
      item.answer = std::string(a.rbegin(), a.rend());
      break;
    case SynthTask::add: {
      const std::string b = digits_of(rng, static_cast<int>(rng.between(1, item.digits)));
      item.prompt = "add " + a + "+" + b + "=";
      item.answer = add_strings(a, b);
      break;
    }
    case SynthTask::frac: {
      // A fraction of `digits`-digit numbers with a common factor, so that there is something to reduce.
      const std::int64_t top = std::stoll(a), bottom = std::stoll(digits_of(rng, item.digits));
      const std::int64_t k = static_cast<std::int64_t>(rng.between(2, 9));
      item.prompt = fmt::format("frac {}/{}=", top * k, bottom * k);
      const std::int64_t g = std::gcd(top, bottom);
      item.answer = bottom / g == 1 ? std::to_string(top / g) : fmt::format("\\frac{{{}}}{{{}}}", top / g, bottom / g);
      break;
    }
  }
  return item;
}

// A response in the format: the answer alone, after "#### ", or in \boxed{}.
std::string response_of(const std::string& answer, SynthFormat format) {
  switch (format) {
    case SynthFormat::plain: return answer;
    case SynthFormat::gsm8k: return "#### " + answer;
    case SynthFormat::math: return "\\boxed{" + answer + "}";
  }
  return answer;
}

ordered_json line(std::initializer_list<std::pair<const char*, ordered_json>> fields) {
  ordered_json j = ordered_json::object();
  for (const auto& [k, v] : fields) j[k] = v;
  return j;
}

}  // namespace

SynthTask parse_synth_task(const std::string& name) {
  if (name == "sort") return SynthTask::sort;
  if (name == "reverse") return SynthTask::reverse;
  if (name == "add") return SynthTask::add;
  if (name == "frac") return SynthTask::frac;
  throw UsageError(fmt::format("--task: unknown task '{}' (sort, reverse, add or frac)", name));
}

SynthFormat parse_synth_format(const std::string& name) {
  if (name == "plain") return SynthFormat::plain;
  if (name == "gsm8k") return SynthFormat::gsm8k;
  if (name == "math") return SynthFormat::math;
  throw UsageError(fmt::format("--format: unknown format '{}' (plain, gsm8k or math)", name));
}

const char* to_string(SynthTask t) {
  switch (t) {
    case SynthTask::sort: return "sort";
    case SynthTask::reverse: return "reverse";
    case SynthTask::add: return "add";
    case SynthTask::frac: return "frac";
  }
  return "?";
}

void validate(const SynthOptions& o) {
  if (o.tasks.empty()) throw UsageError("--task: give at least one task");
  if (o.min_digits < 1) throw UsageError(fmt::format("--min-digits must be at least 1, got {}", o.min_digits));
  if (o.max_digits < o.min_digits) {
    throw UsageError(fmt::format("--max-digits {} is below --min-digits {}", o.max_digits, o.min_digits));
  }
  const bool has_add = std::find(o.tasks.begin(), o.tasks.end(), SynthTask::add) != o.tasks.end();
  const bool has_frac = std::find(o.tasks.begin(), o.tasks.end(), SynthTask::frac) != o.tasks.end();
  if (has_frac && o.max_digits > 6) {
    throw UsageError(fmt::format("--max-digits {} is above 6 for frac (its numbers are operands times 2-9)", o.max_digits));
  }
  const int limit = has_add ? kMaxAnswerDigits - 1 : kMaxAnswerDigits;
  if (o.max_digits > limit) {
    throw UsageError(fmt::format("--max-digits {} is above {}: the math verifier compares answers of at most {} digits{}",
                                 o.max_digits, limit, kMaxAnswerDigits, has_add ? " (a sum may have one more)" : ""));
  }
  if (!(o.tail > 0) || !std::isfinite(o.tail)) throw UsageError(fmt::format("--tail must be positive, got {}", o.tail));
}

std::vector<SynthItem> synth_items(const SynthOptions& o, std::uint64_t stream, std::int64_t count) {
  validate(o);
  Rng rng(o.seed, stream);
  std::vector<SynthItem> items;
  items.reserve(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  for (std::int64_t i = 0; i < count; ++i) {
    items.push_back(make_item(o.tasks[static_cast<std::size_t>(i) % o.tasks.size()], o, rng));
  }
  return items;
}

std::string corrupt_answer(const std::string& answer, Rng& rng) {
  if (answer.find_first_not_of("0123456789") != std::string::npos) {
    // A LaTeX answer (\frac{3}{4}): one of its digits changed, which changes a reduced fraction's value.
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < answer.size(); ++i) {
      if (answer[i] >= '1' && answer[i] <= '9') at.push_back(i);
    }
    std::string s = answer;
    const std::size_t i = at[rng.below(at.size())];
    s[i] = static_cast<char>('1' + (s[i] - '0' + rng.below(8)) % 9);
    return s;
  }
  for (;;) {
    std::string s = answer;
    const std::size_t i = rng.below(s.size());
    switch (rng.below(4)) {
      case 0:  // a digit changed
        s[i] = static_cast<char>('1' + (s[i] - '0' + rng.below(8)) % 9);
        break;
      case 1:  // two neighbours swapped
        if (s.size() >= 2) {
          const std::size_t j = i + 1 < s.size() ? i + 1 : i - 1;
          std::swap(s[i], s[j]);
        }
        break;
      case 2:  // a digit dropped
        if (s.size() >= 2) s.erase(i, 1);
        break;
      default:  // a digit doubled
        s.insert(i, 1, s[i]);
        break;
    }
    // A leading zero would make the same number; a 19th digit one the verifier cannot compare.
    if (s != answer && s.front() != '0' && s.size() <= static_cast<std::size_t>(kMaxAnswerDigits)) return s;
  }
}

std::string prompt_lines(const std::vector<SynthItem>& items, const std::string& id_prefix, SynthFormat format) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    const std::string id = fmt::format("{}{:05d}", id_prefix, i);
    // The worked solution a GSM8K or MATH line carries: the prompt with its answer.
    const std::string worked = it.prompt + it.answer;
    ordered_json l;
    switch (format) {
      case SynthFormat::plain:
        l = line({{"id", id}, {"prompt", it.prompt}, {"answer", it.answer}});
        break;
      case SynthFormat::gsm8k:
        l = line({{"id", id}, {"question", it.prompt}, {"answer", worked + "\n" + response_of(it.answer, format)}});
        break;
      case SynthFormat::math:
        l = line({{"id", id}, {"problem", it.prompt}, {"solution", worked + " so " + response_of(it.answer, format)}});
        break;
    }
    l["task"] = to_string(it.task);
    l["digits"] = it.digits;
    out += l.dump() + "\n";
  }
  return out;
}

std::string sft_lines(const std::vector<SynthItem>& items, SynthFormat format) {
  std::string out;
  for (const auto& it : items) {
    out += line({{"prompt", it.prompt}, {"response", response_of(it.answer, format)}}).dump() + "\n";
  }
  return out;
}

std::string pair_lines(const std::vector<SynthItem>& items, std::uint64_t seed, SynthFormat format) {
  Rng rng(seed, kCorruptStream);
  std::string out;
  for (const auto& it : items) {
    out += line({{"prompt", it.prompt},
                 {"chosen", response_of(it.answer, format)},
                 {"rejected", response_of(corrupt_answer(it.answer, rng), format)}})
               .dump() +
           "\n";
  }
  return out;
}

ordered_json write_synth(const SynthOptions& o, const SynthCounts& counts, const std::filesystem::path& dir) {
  validate(o);
  for (const auto& [name, n] : {std::pair{"--prompts", counts.prompts}, {"--sft", counts.sft}, {"--pairs", counts.pairs},
                                {"--heldout", counts.heldout}}) {
    if (n < 0) throw UsageError(fmt::format("{} must not be negative, got {}", name, n));
  }
  // Every item and every line is held in memory until its file is written: refused from its
  // predicted size (a SynthItem, its texts and a JSON line of some 100 bytes around them,
  // twice for a pair) before anything is drawn.
  const double per_item = double(sizeof(SynthItem)) + 4.0 * o.max_digits + 256.0;
  const double items = double(counts.prompts) + double(counts.sft) + 2.0 * double(counts.pairs) + 3.0 * double(counts.heldout);
  const double bytes = per_item * items;
  require_host_memory(bytes >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(bytes), "", "--prompts, --sft, --pairs, --heldout",
                      fmt::format("{} prompts, {} SFT examples, {} pairs and {} held-out items", counts.prompts,
                                  counts.sft, counts.pairs, counts.heldout));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir.string(), "", "cannot create the output folder: " + ec.message());
  const auto prompts = synth_items(o, kPromptStream, counts.prompts);
  const auto heldout = synth_items(o, kHeldoutStream, counts.heldout);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"prompts.jsonl", prompt_lines(prompts, "train-", o.format)},
      {"sft.jsonl", sft_lines(synth_items(o, kSftStream, counts.sft), o.format)},
      {"pairs.jsonl", pair_lines(synth_items(o, kPairStream, counts.pairs), o.seed, o.format)},
      {"heldout.jsonl", prompt_lines(heldout, "heldout-", o.format)},
      {"heldout-pairs.jsonl", pair_lines(heldout, o.seed + 1, o.format)},
  };
  ordered_json summary;
  summary["format"] = "braid.synth";
  summary["version"] = 1;
  ordered_json tasks = ordered_json::array();
  for (auto t : o.tasks) tasks.push_back(to_string(t));
  summary["tasks"] = tasks;
  summary["shape"] = o.format == SynthFormat::plain ? "plain" : o.format == SynthFormat::gsm8k ? "gsm8k" : "math";
  summary["min_digits"] = o.min_digits;
  summary["max_digits"] = o.max_digits;
  summary["tail"] = o.tail;
  summary["seed"] = o.seed;
  summary["files"] = ordered_json::object();
  for (const auto& [name, text] : files) {
    write_text_file((dir / name).string(), text);
    summary["files"][name] = std::count(text.begin(), text.end(), '\n');
  }
  std::map<int, std::int64_t> histogram;
  for (const auto& it : prompts) ++histogram[it.digits];
  ordered_json h = ordered_json::object();
  for (const auto& [n, c] : histogram) h[std::to_string(n)] = c;
  summary["prompt_digits"] = h;
  return summary;
}

}  // namespace braid::eval
