#include "io/fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <system_error>

#include "core/error.hpp"
#include "io/h5_guard.hpp"

namespace braid::io {
namespace {

namespace fs = std::filesystem;

bool is_weight_file(const fs::path& p) {
  static constexpr std::array<std::string_view, 6> kWeights = {".safetensors", ".bin", ".pt", ".h5", ".gguf",
                                                               ".msgpack"};
  const std::string ext = p.extension().string();
  return std::find(kWeights.begin(), kWeights.end(), ext) != kWeights.end();
}

std::string file_digest(const fs::path& file) {
  const std::string name = file.string();
  try {
    if (const auto seal = h5::read_seal(file, name)) return seal->checksum;
  } catch (const InputError&) {
    // A damaged seal line: the bytes themselves identify the file (its readers refuse it).
  }
  return h5::hash_file(file, 0, name);
}

std::string show(const ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// An input as said in a message: its value, or its files.
std::string files_or_value(const ordered_json& in) {
  if (!in.is_array()) return show(in);
  std::string out;
  for (const auto& f : in) out += (out.empty() ? "" : ", ") + f.value("file", "?");
  return out.empty() ? "no file" : out;
}

// The lines for one input role that differs.
void input_differences(const std::string& role, const ordered_json& a, const ordered_json& b,
                       std::vector<std::string>& out) {
  const std::string where = "input " + role;
  if (a.is_null() || b.is_null()) {
    out.push_back(fmt::format("{}: {} there, {} now", where, a.is_null() ? "absent" : "given",
                              b.is_null() ? "absent" : "given"));
    return;
  }
  if (a == ordered_json(kMadeFromStdin) || b == ordered_json(kMadeFromStdin)) {
    out.push_back(fmt::format("{}: read from standard input, whose content cannot be compared", where));
    return;
  }
  if (!a.is_array() || !b.is_array()) {
    if (a != b) out.push_back(fmt::format("{}: {} there, {} now", where, files_or_value(a), files_or_value(b)));
    return;
  }
  if (a.size() != b.size()) {
    out.push_back(fmt::format("{}: {} file(s) there, {} now", where, a.size(), b.size()));
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string da = a[i].value("digest", ""), db = b[i].value("digest", "");
    if (da == db) continue;
    const std::string fa = a[i].value("file", ""), fb = b[i].value("file", "");
    out.push_back(fa == fb ? fmt::format("{}: {} differs ({} there, {} now)", where, fb, da, db)
                           : fmt::format("{}: {} there, {} now, with other contents", where, fa, fb));
  }
}

}  // namespace

std::string content_digest(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec) throw InputError(path.string(), "", "cannot be read: " + ec.message());
  if (fs::is_regular_file(status)) return file_digest(path);
  if (!fs::is_directory(status)) {
    throw InputError(path.string(), "", "is not a regular file: its content cannot be identified");
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (e.is_regular_file(ec) && !is_weight_file(e.path()) && !e.path().filename().string().starts_with(".")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string listing;
  for (const auto& f : files) listing += f.filename().string() + " " + file_digest(f) + "\n";
  return xxh3_text(listing);
}

MadeFrom::MadeFrom(std::string tool) {
  doc_["tool"] = std::move(tool);
  doc_["output"] = "";
  doc_["options"] = ordered_json::object();
  doc_["given"] = ordered_json::array();
  doc_["inputs"] = ordered_json::object();
}

void MadeFrom::set_options(ordered_json options, std::vector<std::string> given) {
  doc_["options"] = std::move(options);
  doc_["given"] = std::move(given);
}

void MadeFrom::set_option(const std::string& name, const std::string& value) { doc_["options"][name] = value; }

void MadeFrom::add_input(const std::string& role, const std::vector<fs::path>& files) {
  ordered_json list = ordered_json::array();
  for (const auto& f : files) list.push_back({{"file", f.string()}, {"digest", content_digest(f)}});
  doc_["inputs"][role] = std::move(list);
}

void MadeFrom::add_input_value(const std::string& role, const std::string& value) { doc_["inputs"][role] = value; }

void MadeFrom::add_input_stdin(const std::string& role) { doc_["inputs"][role] = kMadeFromStdin; }

void MadeFrom::add_input_path(const std::string& role, const std::string& path) {
  if (path == "-") {
    add_input_stdin(role);
  } else {
    add_input(role, {path});
  }
}

void MadeFrom::add_tokenizer(const std::string& tokenizer) {
  if (tokenizer == "byte") {
    add_input_value("tokenizer", tokenizer);
  } else {
    add_input("tokenizer", {tokenizer});
  }
}

void MadeFrom::set_output(const std::string& role) { doc_["output"] = role; }

ordered_json MadeFrom::to_json() const {
  ordered_json out = doc_;
  out["fingerprint"] = fingerprint();
  return out;
}

std::string MadeFrom::fingerprint() const { return fingerprint_of(doc_); }

std::vector<std::string> made_from_differences(const ordered_json& there, const ordered_json& now) {
  std::vector<std::string> out;
  const std::string fa = fingerprint_of(there), fb = fingerprint_of(now);
  if (fa == fb && fa.starts_with("xxh3-64:")) return out;
  for (const char* key : {"tool", "output"}) {
    const auto text = [key](const ordered_json& m) {   // "" when absent or null (an output may be)
      const auto it = m.find(key);
      return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const std::string a = text(there), b = text(now);
    if (a != b) out.push_back(fmt::format("{}: {} there, {} now", key, a.empty() ? "none" : a, b.empty() ? "none" : b));
  }
  const ordered_json none;
  for (const char* section : {"options", "inputs"}) {
    const ordered_json a = there.value(section, ordered_json::object());
    const ordered_json b = now.value(section, ordered_json::object());
    std::vector<std::string> keys;
    for (const auto& [k, _] : a.items()) keys.push_back(k);
    for (const auto& [k, _] : b.items()) {
      if (!a.contains(k)) keys.push_back(k);
    }
    for (const auto& k : keys) {
      const ordered_json& x = a.contains(k) ? a[k] : none;
      const ordered_json& y = b.contains(k) ? b[k] : none;
      if (std::string(section) == "inputs") {
        input_differences(k, x, y, out);
      } else if (x != y) {
        out.push_back(fmt::format("option {}: {} there, {} now", k, x.is_null() ? "not given" : show(x),
                                  y.is_null() ? "not given" : show(y)));
      }
    }
  }
  if (out.empty()) out.push_back(fmt::format("fingerprint: {} there, {} now", fa, fb));
  return out;
}

}  // namespace braid::io
