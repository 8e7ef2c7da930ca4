// What the machine lets this process hold: the bound a size predicted before allocation is
// checked against, so that an input whose values are each in range but whose total cannot
// fit is refused at once (exit 2) instead of failing with "out of memory" part way through.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

// The bytes of memory this process can ever hold: the smallest of physical memory plus
// swap, its address-space and data-segment limits (ulimit -v, ulimit -d) and its cgroup's
// memory.max. Read once per process.
std::uint64_t host_memory_limit();

// Throws InputError(file, field, "... would take X GiB, more than the Y GiB ...") when
// `bytes` (what `what` is predicted to take) exceeds host_memory_limit().
void require_host_memory(std::uint64_t bytes, const std::string& file, const std::string& field,
                         const std::string& what);

}  // namespace braid
