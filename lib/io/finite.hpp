// Non-finite values (NaN, ±Inf) never pass silently: every float array a stage
// reads from a shard, or is about to write to one, goes through require_finite,
// which refuses (InputError: exit 2) naming the file, the tensor or array, and
// the first bad index.
//
//   io::require_finite(values, "step-100.h5", "/model.norm.weight", "stored");
//   // InputError: step-100.h5: /model.norm.weight: value 17 of 4096 is nan (stored); ...
//
// The scan is one pass over the values, blockwise and branch-free inside a
// block so that it vectorises (a few GB/s a core: a small part of an HDF5 read).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace braid::io {

struct SampleBatch;

// Index of the first NaN or ±Inf in `values`; values.size() when all are finite.
std::size_t first_non_finite(std::span<const float> values);

// InputError(file, field, ...) naming the first non-finite value and its index;
// `context` says where it was met ("stored", "computed, refusing to write").
void require_finite(std::span<const float> values, const std::string& file, const std::string& field,
                    std::string_view context);

// Every float array of a batch: /reward and the per-token arrays.
void require_finite(const SampleBatch& batch, const std::string& file, std::string_view context);

}  // namespace braid::io
