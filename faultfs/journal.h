// The durability model's record of what a program did and when each operation became durable, so a
// verdict can name the call that was missing ("step_8.pt: 1.20 MiB written, never fsynced — lost").
// Writes to one file with no other operation on it between coalesce into one entry (other files'
// writes may interleave), so a 1 GiB save is a handful of entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::faultfs {

using NodeId = uint64_t;

struct JournalEntry {
  uint64_t seq = 0;          // position in the journal's clock, 1-based; every operation ticks it
  int64_t time_ns = 0;       // nanoseconds since the model started
  std::string op;            // create, open-trunc, write, truncate, fallocate, fsync, fdatasync,
                             // fsync-dir, rename, unlink, mkdir, rmdir, link, symlink, sync,
                             // power-loss, recover
  std::string path;          // relative to the root of the file system ("ckpt/step_8.pt"; "" is the root)
  std::string to;            // rename and link: the new name
  uint64_t offset = 0;       // write, fallocate: the lowest offset written
  uint64_t bytes = 0;        // write: bytes written; truncate: the new size
  uint64_t durable_seq = 0;  // the seq of the call that made it durable; 0 while it is not
  bool lost = false;         // a power loss came while it was not durable
  NodeId node = 0;           // the file (data ops) whose fsync it waits on
  // The calls it still waits on ("fsync of ckpt/step_8.pt", "fsync of ckpt/"), and the model's ids
  // of those files and directories, index for index.
  std::vector<std::string> waiting_on;
  std::vector<NodeId> waiting_nodes;
};

// One thing a power loss undid, and the call that would have kept it.
struct Loss {
  std::string path;          // the file or name affected
  std::string message;       // "ckpt/step_8.pt: 1.20 MiB written, never fsynced — lost"
  std::string missing_call;  // "fsync of ckpt/step_8.pt"
};

// The journal and the losses as JSON text on one line (the control protocol's reply format):
// {"entries":[{"seq":..,"time_ns":..,"op":..,"path":..,"to":..,"offset":..,"bytes":..,
//   "durable_seq":N|null,"lost":bool,"waiting_on":[..]}],"losses":[{"path","message","missing_call"}]}
std::string journal_json(const std::vector<JournalEntry>& entries, const std::vector<Loss>& losses);
std::string losses_json(const std::vector<Loss>& losses);

}  // namespace ckpt::faultfs
