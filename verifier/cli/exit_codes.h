// Exit codes are an API (scripts and CI gates branch on them), and this is the one place that maps
// an error to one:
//   0  every check passed
//   1  a checkpoint, drill or diff failed a check: the bytes are damaged (corruption, a torn tail)
//      or the comparison diverged
//   2  usage or I/O: bad flags, a bad config, an unreadable or unsupported path
#pragma once

#include <string>

#include "base/status.h"

namespace ckpt {

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitUsage = 2;

// Damaged bytes fail a check (1); anything else is usage or I/O (2).
int exit_code_for(const Status& status);

// Prints "ckptcheck <command>: <status>" on stderr and returns exit_code_for(status).
int report_failure(const char* command, const Status& status);
// The same for a command run with --json, which always answers in JSON: also prints
// {"ok": false, "path", "exit_code", "errors": [{"code", "message"}]} on stdout, the code the status's
// ("corruption", "truncated", "ambiguous", "io error", "not supported", ...).
int report_failure_json(const char* command, const std::string& path, const Status& status);
// What every --json command prints on stdout when it has no report to give (it cannot read the path,
// a usage error): {"ok": false, "path", "exit_code", "errors": [{"code", "message"}]}.
void write_failure_json(const std::string& path, int exit_code, const Status& status,
                        const std::string& message);

}  // namespace ckpt
