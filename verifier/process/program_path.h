// The file a program name runs, found as execvp(3) finds it: a name with a '/' as given, else the
// first executable of that name in PATH. Asked before a run starts, so that a typo in a program's
// path is an error naming it instead of a child that exits 127 without a word.
#pragma once

#include <string>

#include "base/status.h"

namespace ckpt {

// kNotFound naming `name` (and PATH when it was searched) when nothing executable is there.
Result<std::string> find_program(const std::string& name);

}  // namespace ckpt
