// Command lines as text, for messages and Makefile recipes: each argument quoted
// for a POSIX shell only when it needs it. (braid run itself never goes through a
// shell: it passes argv to posix_spawn.)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid {

// `arg` as one shell word: unchanged when it is plain, else in single quotes.
std::string shell_quote(std::string_view arg);
// The words joined by spaces, each quoted as needed.
std::string shell_line(const std::vector<std::string>& argv);

}  // namespace braid
