// A Hugging Face model folder: config.json and the weights, either one
// model.safetensors or several listed by model.safetensors.index.json
// ({"weight_map": {tensor name: file name}}).
#pragma once

#include "core/json.hpp"
#include "hf/safetensors.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braid::hf {

class HfFolder {
 public:
  // InputError naming the folder or file when config.json or the weights are missing.
  explicit HfFolder(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const json& config() const { return config_; }
  std::filesystem::path config_path() const { return dir_ / "config.json"; }

  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return holder_of_.contains(name); }
  const SafetensorsReader& holder(const std::string& name) const;
  Shape shape(const std::string& name) const { return holder(name).info(name).shape; }
  void read(const std::string& name, float* dst) const { holder(name).read(name, dst); }

 private:
  std::filesystem::path dir_;
  json config_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, std::size_t> holder_of_;
};

}  // namespace braid::hf
