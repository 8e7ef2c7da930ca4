// Pre-tokenizer patterns of tokenizer.json (\p{L}, \p{N}, lookahead) need a
// Unicode-aware Perl regex engine: this wraps PCRE2 in UTF + UCP mode.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::tok {

class Regex {
 public:
  // Throws InputError(origin, field, ...) when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& origin, const std::string& field);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Every non-overlapping match as (begin, end) byte offsets, left to right.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How a Split pre-tokenizer treats the delimiters it finds (HF names).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Cuts text at the given matches; empty pieces are dropped. split_ranges gives the
// pieces as [begin, end) byte ranges of text.
using ByteRange = std::pair<std::size_t, std::size_t>;
std::vector<ByteRange> split_ranges(std::size_t text_size, const std::vector<ByteRange>& matches, SplitBehavior behavior);
std::vector<std::string> split_at_matches(std::string_view text,
                                          const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                                          SplitBehavior behavior);

}  // namespace braid::tok
