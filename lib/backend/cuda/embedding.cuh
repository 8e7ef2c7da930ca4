// Token embedding on CUDA: a gather of table rows (table stored as f32 or bf16) and its
// backward, a scatter-add into d_table (atomic: rows may repeat a token).
#pragma once

#include "backend/dtype.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void embedding_forward(cudaStream_t s, const std::int32_t* ids, std::int64_t n, const void* table, DType table_type,
                       std::int64_t dim, float* out);
void embedding_backward(cudaStream_t s, const std::int32_t* ids, std::int64_t n, const float* d_out, std::int64_t dim,
                        float* d_table);

}  // namespace braid::backend::cuda
