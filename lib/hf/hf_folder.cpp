#include "hf/hf_folder.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace braid::hf {

HfFolder::HfFolder(std::filesystem::path dir) : dir_(std::move(dir)) {
  if (!std::filesystem::is_directory(dir_)) {
    throw InputError(dir_.string(), "", "is not a folder (expected a Hugging Face model folder with config.json)");
  }
  if (!std::filesystem::exists(config_path())) throw InputError(config_path().string(), "", "missing");
  config_ = load_json_file(config_path().string());

  const auto single = dir_ / "model.safetensors";
  const auto index = dir_ / "model.safetensors.index.json";
  std::vector<std::string> files;
  std::map<std::string, std::string> declared;  // tensor -> file, from the index
  if (std::filesystem::exists(index)) {
    const json doc = load_json_file(index.string());
    if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object()) {
      throw InputError(index.string(), "weight_map", "must be an object of tensor name -> file name");
    }
    for (auto& [name, file] : doc["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
        throw InputError(index.string(), "weight_map." + name, "must be a file name in the same folder");
      }
      declared[name] = file.get<std::string>();
      if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end()) files.push_back(file);
    }
  } else if (std::filesystem::exists(single)) {
    files.push_back("model.safetensors");
  } else {
    throw InputError(dir_.string(), "", "has neither model.safetensors nor model.safetensors.index.json");
  }

  for (const std::string& f : files) {
    files_.push_back(std::make_unique<SafetensorsReader>(dir_ / f));
    for (const std::string& name : files_.back()->names()) {
      if (holder_of_.contains(name)) {
        throw InputError(dir_.string(), name, fmt::format("tensor is in both {} and {}",
                                                          files_[holder_of_[name]]->path().filename().string(), f));
      }
      holder_of_[name] = files_.size() - 1;
    }
  }
  for (const auto& [name, file] : declared) {
    auto it = holder_of_.find(name);
    if (it == holder_of_.end() || files_[it->second]->path().filename() != file) {
      throw InputError(index.string(), "weight_map." + name, fmt::format("tensor is not in {}", file));
    }
  }
}

std::vector<std::string> HfFolder::names() const {
  std::vector<std::string> out;
  for (const auto& [n, i] : holder_of_) out.push_back(n);
  return out;
}

const SafetensorsReader& HfFolder::holder(const std::string& name) const {
  auto it = holder_of_.find(name);
  if (it == holder_of_.end()) throw InputError(dir_.string(), name, "no such tensor in the model's safetensors files");
  return *files_[it->second];
}

}  // namespace braid::hf
