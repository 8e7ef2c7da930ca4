// The few UTF-8 operations tokenizers need. Invalid bytes are never an error
// here: each one stands alone as a one-byte "character", so any byte string
// can be split, merged and put back together unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::tok::utf8 {

// Length of the character that starts with byte b (1 for invalid lead bytes).
std::size_t char_length(std::string_view text, std::size_t pos);

// The text cut into characters (views into text).
std::vector<std::string_view> chars(std::string_view text);

// Decodes the character at pos; sets len. Invalid sequences give the byte value.
char32_t decode_at(std::string_view text, std::size_t pos, std::size_t& len);

std::string encode(char32_t cp);

}  // namespace braid::tok::utf8
