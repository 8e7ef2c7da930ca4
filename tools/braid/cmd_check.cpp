// braid check FILE...: answers by exit code alone whether every file is a good,
// complete braid file (like samtools quickcheck). 0: all good; 1: some are not
// (-v names them and says why, on stderr); 2: the command line is wrong.
// Every dataset of an HDF5 file is read and compared with its checksum, and -v
// notes files whose datasets carry none (written before checksums).
#include <filesystem>
#include <memory>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

#include "core/log.hpp"
#include "checkpoint/weight_layout.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_check_command(CLI::App& app, Verbs& verbs) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand(
      "check",
      "Check braid files (sample shards, weight shards, braid JSON): the seal, every checksum and every value, and a "
      "weight shard's tensors against its model_config (none missing, extra or of another shape); exit 0 when all are good "
      "and complete (every dataset's checksum verified), 1 when some are not (-v lists them with the reason, and "
      "notes files without checksums); prints nothing otherwise");
  sub->add_option("files", *files, "Files to check (a checkpoint's name: all of its stage and tp files)")->required();
  verbs.add(sub, [files, &app] {
    const bool tell = verbose(app);
    int bad = 0;
    // A checkpoint's name (no file of its own) stands for its stage and tensor-parallel files.
    std::vector<std::string> expanded;
    for (const auto& f : *files) {
      std::error_code ec;
      std::vector<std::filesystem::path> members;
      if (!std::filesystem::exists(f, ec)) {
        try {
          members = checkpoint::checkpoint_files(f);
        } catch (const InputError&) {
          members.clear();  // checked below as the missing file it is
        }
      }
      if (members.empty()) expanded.push_back(f);
      for (const auto& m : members) expanded.push_back(m.string());
    }
    for (const auto& f : expanded) {
      std::vector<std::string> notes;
      if (auto problem = checkpoint::check_braid_file(f, &notes)) {
        ++bad;
        if (tell) log::write(log::Level::quiet, "", *problem);
      }
      if (tell) {
        for (const auto& n : notes) log::write(log::Level::quiet, "", n);
      }
    }
    return bad == 0 ? 0 : 1;
  });
}

}  // namespace braid::driver
