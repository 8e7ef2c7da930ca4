#include "backend/dtype_option.hpp"

#include <string>
#include <vector>

namespace braid::backend {

CLI::Option* add_dtype_option(CLI::App& app, DType& dtype) {
  return app
      .add_option_function<std::string>(
          "--dtype", [&dtype](const std::string& s) { dtype = *parse_dtype(s); },
          "Storage type of the model's weights: f32, or bf16 (half the weight memory; activations, gradients and "
          "the optimizer's master copy stay f32)")
      ->check(CLI::IsMember(std::vector<std::string>{"f32", "bf16"}))
      ->type_name("DTYPE")
      ->default_str(std::string(dtype_name(dtype)));
}

}  // namespace braid::backend
