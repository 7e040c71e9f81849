// Library option validation names the fields of its options struct, never a flag: it quotes each
// field a message names in backquotes ("`save_at` and `resume_steps` must be >= 1"). A program
// that embeds the library reads the names it set; the CLI shows, for each field, the flag that
// sets it ("--save-at and --resume-steps must be >= 1"). Each command keeps one table, field ->
// flag, beside the add_option() calls that bind those fields, and passes the library's messages
// through with_flags() before printing them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ckpt {

// One command's fields and the flags (or, for a positional, the usage words) that set them.
using FieldFlags = std::vector<std::pair<std::string, std::string>>;

// `message` with every backquoted field of `flags` replaced by its flag. Any other backquoted text
// (a field the table lacks, a command line such as `ckptcheck seal DIR`) stays as it is.
std::string with_flags(const std::string& message, const FieldFlags& flags);

// The tables of the commands whose library validation names fields; each lives in its command's file.
const FieldFlags& drill_field_flags();   // DrillOptions (verifier/drill/drill.h)
const FieldFlags& verify_field_flags();  // VerifyOptions (verifier/check/checkpoint_verifier.h)
const FieldFlags& seal_field_flags();    // SealOptions (verifier/check/seal.h)
const FieldFlags& pilot_field_flags();   // PilotStudyOptions (verifier/pilot/pilot_study.h)

}  // namespace ckpt
