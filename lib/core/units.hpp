// Sizes as people read them in messages and logs.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

// "2.05 GiB"; under a hundredth of a GiB in MiB ("5.00 MiB"), so that a small size
// does not read as 0.00 GiB.
std::string gib(std::uint64_t bytes);

}  // namespace braid
