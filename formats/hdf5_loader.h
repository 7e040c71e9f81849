// libhdf5 loaded when a command first needs it, not when the program starts. Linked, it and what
// it links (libcurl for its ros3 driver, and through that GnuTLS, Kerberos, LDAP, ...) cost every
// ckptcheck process ~18 ms of loading and relocation on the bench machine, more than half of the
// start of a `verify --quick` that never reads an HDF5 file (issue 44).
//
// How: this file defines every libhdf5 function and ID variable the tree uses, under its own
// name, so nothing links libhdf5 itself. The first call of any of them loads the library with
// dlopen and takes all the real ones with dlsym at once; each definition then calls the real one.
// Whatever includes <hdf5.h> (the reader, the writer, the pins, the tests that craft files) keeps
// calling the API as written. The reader forks a child that runs libhdf5 (hdf5_file.h): it loads
// the library first, so the child never calls the loader after fork().
#pragma once

#include <string>

#include "base/status.h"

namespace ckpt::hdf5 {

// Loads libhdf5 once (later calls return the first call's result): an I/O error naming the
// library and the loader's reason where it cannot be loaded or lacks a function this tree calls.
Status load_library();

// The library's file name as this build loads it ("libhdf5_serial.so.103").
std::string library_name();

}  // namespace ckpt::hdf5
