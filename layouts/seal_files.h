// The names a seal is written under. The layouts read them as evidence (a folder only its seal
// describes, a root that holds its own seal); verifier/check/seal.h writes and checks them.
#pragma once

namespace ckpt {

constexpr const char* kSealFileName = "ckptcheck.seal.json";
constexpr const char* kSealFileSuffix = ".ckptcheck.seal.json";  // beside a single sealed file
constexpr const char* kIntegrityFileName = "integrity.json";

}  // namespace ckpt
