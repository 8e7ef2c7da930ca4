// --dtype f32|bf16: the storage type of a model's weights, defined once for every tool that
// opens a model (braid-generate, braid-score, braid-train, braid-profile measure). f32 is
// the default; bf16 halves weight memory (compute and gradients stay f32; training keeps an
// f32 master copy in the optimizer).
#pragma once

#include "backend/dtype.hpp"

#include <CLI/CLI.hpp>

namespace braid::backend {

CLI::Option* add_dtype_option(CLI::App& app, DType& dtype);

}  // namespace braid::backend
