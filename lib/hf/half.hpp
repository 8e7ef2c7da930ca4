// float16 and bfloat16 <-> float32, bit by bit, for safetensors files: the backend's
// conversions (backend/dtype.hpp), under the names the safetensors code uses.
#pragma once

#include "backend/dtype.hpp"

namespace braid::hf {

using backend::bf16_to_float;
using backend::f16_to_float;
using backend::float_to_bf16;
using backend::float_to_f16;

}  // namespace braid::hf
