#include "backend/dtype_option.hpp"

#include <map>
#include <string>

namespace braid::backend {

CLI::Option* add_dtype_option(CLI::App& app, DType& dtype) {
  static const std::map<std::string, DType> kChoices{{"f32", DType::f32}, {"bf16", DType::bf16}};
  return app
      .add_option("--dtype", dtype,
                  "Storage type of the model's weights: f32, or bf16 (half the weight memory; activations, "
                  "gradients and the optimizer's master copy stay f32)")
      ->transform(CLI::CheckedTransformer(kChoices))
      ->default_str(std::string(dtype_name(dtype)));
}

}  // namespace braid::backend
