#include "io/weight_shard.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "io/finite.hpp"
#include "io/fingerprint.hpp"
#include "io/h5.hpp"
#include "io/shard_header.hpp"

namespace braid::io {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string optimizer_tensor_name(const std::string& param_name, const std::string& state) {
  return param_name + "." + state;
}

// ---- writer -----------------------------------------------------------------

struct WeightShardWriter::Impl {
  AtomicFile out;
  h5::File file;
  std::set<std::string> names;
  bool committed = false;
  std::string meta_kind;  // for the message that refuses a non-finite tensor
  std::int64_t meta_step = 0;

  // The path, once meta can be written: a step out of range is refused before any file exists.
  static const std::filesystem::path& checked(const std::filesystem::path& path, const WeightShardMeta& meta) {
    if (meta.step < 0 || meta.step > kMaxStep) {
      throw InputError(path.string(), "attribute step", fmt::format("would be {}, outside [0, {}]", meta.step, kMaxStep));
    }
    return path;
  }

  Impl(const std::filesystem::path& path, const WeightShardMeta& meta)
      : out(checked(path, meta)), file(h5::File::create(out.temp_path(), path.string())), meta_kind(meta.kind),
        meta_step(meta.step) {
    if (meta.kind != "weights" && meta.kind != "optimizer" && meta.kind != "adapters") {
      throw std::invalid_argument("WeightShardMeta::kind must be \"weights\", \"optimizer\" or \"adapters\", not " +
                                  meta.kind);
    }
    write_header(file, kWeightsFormat, kWeightsVersion);
    file.set_attr("kind", meta.kind);
    file.set_attr("model_config", meta.model_config);
    file.set_attr("layer_begin", std::int64_t{meta.layer_begin});
    file.set_attr("layer_end", std::int64_t{meta.layer_end});
    file.set_attr("has_embedding", std::int64_t{meta.has_embedding ? 1 : 0});
    file.set_attr("has_head", std::int64_t{meta.has_head ? 1 : 0});
    file.set_attr("tp_rank", std::int64_t{meta.tp_rank});
    file.set_attr("tp_size", std::int64_t{meta.tp_size});
    file.set_attr("step", meta.step);
    file.set_attr("created_by", meta.created_by);
    if (!meta.made_from.empty()) file.set_attr("made_from", meta.made_from);
    if (!meta.adapter_config.empty()) file.set_attr("adapter_config", meta.adapter_config);
  }
};

WeightShardWriter::WeightShardWriter(std::filesystem::path path, WeightShardMeta meta)
    : impl_(std::make_unique<Impl>(path, meta)) {}
WeightShardWriter::~WeightShardWriter() = default;
WeightShardWriter::WeightShardWriter(WeightShardWriter&&) noexcept = default;
WeightShardWriter& WeightShardWriter::operator=(WeightShardWriter&&) noexcept = default;

const std::filesystem::path& WeightShardWriter::path() const { return impl_->out.final_path(); }

void WeightShardWriter::add(const std::string& name, const Shape& shape, const float* data) {
  if (impl_->committed) throw std::logic_error("WeightShardWriter::add after commit");
  if (name.empty() || name.find('/') != std::string::npos || name == ".") {
    throw std::invalid_argument("bad tensor name \"" + name + "\" (empty or contains '/')");
  }
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in the shape of " + name);
  }
  if (!impl_->names.insert(name).second) throw std::invalid_argument("tensor " + name + " added twice");
  require_finite({data, static_cast<std::size_t>(numel(shape))}, path().string(), name,
                 fmt::format("{} of step {}, refusing to write it", impl_->meta_kind, impl_->meta_step));
  impl_->file.write_tensor(name, shape, data);
}

void WeightShardWriter::add(const std::string& name, const Shape& shape, std::span<const float> data) {
  if (static_cast<std::int64_t>(data.size()) != numel(shape)) {
    throw std::invalid_argument(fmt::format("tensor {}: {} values for shape {}", name, data.size(),
                                            shape_string(shape)));
  }
  add(name, shape, data.data());
}

void WeightShardWriter::commit() {
  if (impl_->committed) throw std::logic_error("WeightShardWriter::commit called twice");
  mark_complete(impl_->file);
  impl_->file.close();
  impl_->out.commit();
  impl_->committed = true;
}

// ---- reader -----------------------------------------------------------------

struct WeightShardReader::Impl {
  std::filesystem::path path;
  h5::File file;
  WeightShardMeta meta;
  std::vector<std::string> names;
  std::map<std::string, Shape> shapes;

  explicit Impl(std::filesystem::path p) : path(std::move(p)), file(h5::File::open_read(path)) {
    check_header(file, kWeightsFormat, kWeightsVersion);
    const std::string& fname = file.name();
    auto int_attr = [&](const char* attr, std::int64_t dflt) { return file.attr_int(attr).value_or(dflt); };
    meta.kind = file.attr_string("kind").value_or("weights");
    if (meta.kind != "weights" && meta.kind != "optimizer" && meta.kind != "adapters") {
      throw InputError(fname, "attribute kind",
                       "is \"" + meta.kind + "\", expected \"weights\", \"optimizer\" or \"adapters\"");
    }
    meta.adapter_config = file.attr_string("adapter_config").value_or("");
    if (meta.kind == "adapters" && parse_json_or_discarded(meta.adapter_config).is_discarded()) {
      throw InputError(fname, "attribute adapter_config", "is missing or not valid JSON text");
    }
    meta.model_config = file.attr_string("model_config").value_or("");
    const json cfg = meta.model_config.empty() ? json() : parse_json_or_discarded(meta.model_config);
    if (cfg.is_discarded()) {
      throw InputError(fname, "attribute model_config",
                       fmt::format("is not valid JSON text (or nests deeper than {} levels)", kMaxJsonDepth));
    }
    meta.layer_begin = static_cast<int>(int_attr("layer_begin", 0));
    const std::int64_t layer_end = int_attr("layer_end", 0);
    meta.layer_end = static_cast<int>(int_attr("layer_end", 0));
    meta.has_embedding = int_attr("has_embedding", 0) != 0;
    meta.has_head = int_attr("has_head", 0) != 0;
    meta.tp_rank = static_cast<int>(int_attr("tp_rank", 0));
    meta.tp_size = static_cast<int>(int_attr("tp_size", 1));
    meta.step = int_attr("step", 0);
    meta.created_by = file.attr_string("created_by").value_or("");
    meta.made_from = file.attr_string("made_from").value_or("");
    parse_made_from(meta.made_from, fname);
    if (meta.step < 0 || meta.step > kMaxStep) {
      throw InputError(fname, "attribute step", fmt::format("is {}, must be in [0, {}]", meta.step, kMaxStep));
    }
    // The layers must lie in the model: [layer_begin, layer_end) within num_hidden_layers.
    if (!meta.model_config.empty()) {
      const auto n = cfg.is_object() ? cfg.find("num_hidden_layers") : cfg.end();
      if (cfg.is_object() && n != cfg.end() && n->is_number_integer() && layer_end > n->get<std::int64_t>()) {
        throw InputError(fname, "attribute layer_end",
                         fmt::format("is {}, past the model's {} layers (num_hidden_layers of model_config)",
                                     layer_end, n->get<std::int64_t>()));
      }
    }
    if (meta.layer_begin < 0 || meta.layer_end < meta.layer_begin) {
      throw InputError(fname, "attribute layer_end",
                       fmt::format("layers [{}, {}) are not a range", meta.layer_begin, meta.layer_end));
    }
    if (meta.tp_size < 1 || meta.tp_rank < 0 || meta.tp_rank >= meta.tp_size) {
      throw InputError(fname, "attribute tp_rank",
                       fmt::format("tp_rank {} is not in [0, tp_size = {})", meta.tp_rank, meta.tp_size));
    }
    const auto paths = file.dataset_paths();
    auto has = [&](const char* dataset) { return std::find(paths.begin(), paths.end(), dataset) != paths.end(); };
    if (has("tokens") && has("offsets") && has("sample_id")) {
      throw InputError(fname, "attribute format",
                       fmt::format("is \"{}\" but the file holds a sample shard's datasets (/tokens, /offsets, "
                                   "/sample_id): a sample shard labelled as weights",
                                   kWeightsFormat));
    }
    for (const auto& name : paths) {
      // Adam moments are "<parameter>.<moment>"; a parameter's own name ends in .weight or .bias.
      const bool param_name = name.ends_with(".weight") || name.ends_with(".bias");
      if (meta.kind == "optimizer" && param_name) {
        throw InputError(fname, "attribute kind",
                         fmt::format("is \"optimizer\" but /{} is a parameter, not an optimizer moment "
                                     "(<parameter>.<moment>): weights labelled as optimizer state",
                                     name));
      }
      const auto info = file.dataset_info(name);
      if (info.type_class != H5T_FLOAT || info.type_size > 4) {
        throw InputError(fname, "/" + name, "is stored as " + info.type_name() + ", expected float32");
      }
      names.push_back(name);
      shapes[name] = info.dims;
    }
  }
};

WeightShardReader::WeightShardReader(std::filesystem::path path)
    : impl_(std::make_unique<Impl>(std::move(path))) {}
WeightShardReader::~WeightShardReader() = default;
WeightShardReader::WeightShardReader(WeightShardReader&&) noexcept = default;
WeightShardReader& WeightShardReader::operator=(WeightShardReader&&) noexcept = default;

const std::filesystem::path& WeightShardReader::path() const { return impl_->path; }
const WeightShardMeta& WeightShardReader::meta() const { return impl_->meta; }
const std::vector<std::string>& WeightShardReader::names() const { return impl_->names; }
bool WeightShardReader::contains(const std::string& name) const { return impl_->shapes.count(name) > 0; }

Shape WeightShardReader::shape(const std::string& name) const {
  auto it = impl_->shapes.find(name);
  if (it == impl_->shapes.end()) throw InputError(impl_->file.name(), name, "no such tensor in this shard");
  return it->second;
}

void WeightShardReader::read(const std::string& name, float* dst) const {
  const Shape s = shape(name);
  impl_->file.read<float>(name, dst, static_cast<std::size_t>(numel(s)));
  require_finite({dst, static_cast<std::size_t>(numel(s))}, impl_->file.name(), name, "stored");
}

std::vector<float> WeightShardReader::read(const std::string& name) const {
  std::vector<float> out(static_cast<std::size_t>(numel(shape(name))));
  read(name, out.data());
  return out;
}

void WeightShardReader::read_slice(const std::string& name, int axis, std::int64_t begin, std::int64_t end,
                                   float* dst) const {
  const Shape s = shape(name);
  if (axis < 0 || axis >= static_cast<int>(s.size())) {
    throw std::invalid_argument(fmt::format("{}: no axis {} in shape {}", name, axis, shape_string(s)));
  }
  Shape start(s.size(), 0), count = s;
  start[static_cast<std::size_t>(axis)] = begin;
  count[static_cast<std::size_t>(axis)] = end - begin;
  impl_->file.read_box(name, start, count, dst);
  require_finite({dst, static_cast<std::size_t>(numel(count))}, impl_->file.name(), name, "stored");
}

// ---- several shards ---------------------------------------------------------

WeightShardSet::WeightShardSet(const std::vector<std::filesystem::path>& paths) {
  if (paths.empty()) throw UsageError("no weight shard given");
  shards_.reserve(paths.size());
  for (const auto& p : paths) shards_.emplace_back(p);
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    for (const auto& name : shards_[i].names()) {
      auto [it, fresh] = holder_of_.emplace(name, i);
      if (!fresh) {
        throw InputError(shards_[i].path().string(), name,
                         "tensor also in " + shards_[it->second].path().string() + ": which one to load is ambiguous");
      }
    }
  }
}

std::vector<std::string> WeightShardSet::names() const {
  std::vector<std::string> out;
  out.reserve(holder_of_.size());
  for (const auto& [name, _] : holder_of_) out.push_back(name);
  return out;
}

bool WeightShardSet::contains(const std::string& name) const { return holder_of_.count(name) > 0; }

const WeightShardReader& WeightShardSet::holder(const std::string& name) const {
  auto it = holder_of_.find(name);
  if (it == holder_of_.end()) {
    std::vector<std::string> files;
    for (const auto& s : shards_) files.push_back(s.path().string());
    throw InputError(fmt::format("{}", fmt::join(files, ", ")), name, "no shard holds this tensor");
  }
  return shards_[it->second];
}

int WeightShardSet::layer_begin() const {
  int v = shards_.front().meta().layer_begin;
  for (const auto& s : shards_) v = std::min(v, s.meta().layer_begin);
  return v;
}

int WeightShardSet::layer_end() const {
  int v = shards_.front().meta().layer_end;
  for (const auto& s : shards_) v = std::max(v, s.meta().layer_end);
  return v;
}

}  // namespace braid::io
