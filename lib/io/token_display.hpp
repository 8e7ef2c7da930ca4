// The byte-level tokenizer braid uses when no other is configured: token id =
// byte value (0..255), plus three special ids above the bytes. Small models
// and tests use it end to end; `braid inspect` uses it to show samples.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace braid::io::byte_tokenizer {

inline constexpr std::int32_t kBos = 256;
inline constexpr std::int32_t kEos = 257;
inline constexpr std::int32_t kPad = 258;
inline constexpr std::int32_t kVocabSize = 259;

// One token per byte, after a kBos when add_bos.
std::vector<std::int32_t> encode(std::string_view text, bool add_bos = false);

// The bytes back (special and out-of-range ids are dropped).
std::string decode(std::span<const std::int32_t> tokens);

// One printable line for humans: printable ASCII as is; \n, \t, \\ and other
// bytes escaped (\xNN); special ids as <bos>, <eos>, <pad>; ids outside the
// vocabulary as <id:N>, so any tokenizer's output still shows something.
std::string decode_for_display(std::span<const std::int32_t> tokens);

}  // namespace braid::io::byte_tokenizer
