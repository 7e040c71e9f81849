// Internal: the one conversion from the project's Status to the public one. Not installed.
#pragma once

#include "api/ckptcheck.h"
#include "base/status.h"

namespace ckptcheck {

// The message as the CLI prints it ("corruption: shard-00001.cks @0x40: ..."); damage() for
// corruption and torn tails.
Status public_status(const ckpt::Status& status);

}  // namespace ckptcheck
