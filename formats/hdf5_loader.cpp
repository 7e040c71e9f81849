#include "formats/hdf5_loader.h"

#include <dlfcn.h>
#include <hdf5.h>

// Named, not anonymous: a unity batch puts this file beside others with names of their own.
namespace ckpt::hdf5_loading {

// Every libhdf5 function the tree calls: its return type, name, parameters and the call's
// arguments, as <hdf5.h> declares it (1.10). The definitions below must match those declarations,
// or they do not compile.
#define CKPT_HDF5_FUNCTIONS(X)                                                                               \
  X(herr_t, H5Aclose, (hid_t attr_id), (attr_id))                                                            \
  X(herr_t, H5check_version, (unsigned majnum, unsigned minnum, unsigned relnum), (majnum, minnum, relnum))  \
  X(hid_t, H5Acreate2,                                                                                       \
    (hid_t loc_id, const char *attr_name, hid_t type_id, hid_t space_id, hid_t acpl_id, hid_t aapl_id),      \
    (loc_id, attr_name, type_id, space_id, acpl_id, aapl_id))                                                \
  X(htri_t, H5Aexists, (hid_t obj_id, const char *attr_name), (obj_id, attr_name))                           \
  X(hid_t, H5Aget_space, (hid_t attr_id), (attr_id))                                                         \
  X(hid_t, H5Aget_type, (hid_t attr_id), (attr_id))                                                          \
  X(hid_t, H5Aopen, (hid_t obj_id, const char *attr_name, hid_t aapl_id), (obj_id, attr_name, aapl_id))      \
  X(herr_t, H5Aread, (hid_t attr_id, hid_t type_id, void *buf), (attr_id, type_id, buf))                     \
  X(herr_t, H5Awrite, (hid_t attr_id, hid_t type_id, const void *buf), (attr_id, type_id, buf))              \
  X(herr_t, H5Dclose, (hid_t dset_id), (dset_id))                                                            \
  X(hid_t, H5Dcreate2,                                                                                       \
    (hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id,            \
     hid_t dapl_id),                                                                                         \
    (loc_id, name, type_id, space_id, lcpl_id, dcpl_id, dapl_id))                                            \
  X(herr_t, H5Dget_chunk_info,                                                                               \
    (hid_t dset_id, hid_t fspace_id, hsize_t chk_idx, hsize_t * offset, unsigned *filter_mask,               \
     haddr_t *addr, hsize_t *size),                                                                          \
    (dset_id, fspace_id, chk_idx, offset, filter_mask, addr, size))                                          \
  X(hid_t, H5Dget_create_plist, (hid_t dset_id), (dset_id))                                                  \
  X(herr_t, H5Dget_num_chunks, (hid_t dset_id, hid_t fspace_id, hsize_t * nchunks),                          \
    (dset_id, fspace_id, nchunks))                                                                           \
  X(haddr_t, H5Dget_offset, (hid_t dset_id), (dset_id))                                                      \
  X(hid_t, H5Dget_space, (hid_t dset_id), (dset_id))                                                         \
  X(hsize_t, H5Dget_storage_size, (hid_t dset_id), (dset_id))                                                \
  X(hid_t, H5Dget_type, (hid_t dset_id), (dset_id))                                                          \
  X(hid_t, H5Dopen2, (hid_t loc_id, const char *name, hid_t dapl_id), (loc_id, name, dapl_id))               \
  X(herr_t, H5Dread,                                                                                         \
    (hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id, void *buf),   \
    (dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, buf))                                       \
  X(herr_t, H5Dwrite,                                                                                        \
    (hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id,               \
     const void *buf),                                                                                       \
    (dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, buf))                                       \
  X(herr_t, H5Eset_auto2, (hid_t estack_id, H5E_auto2_t func, void *client_data),                            \
    (estack_id, func, client_data))                                                                          \
  X(herr_t, H5Fclose, (hid_t file_id), (file_id))                                                            \
  X(hid_t, H5Fcreate, (const char *filename, unsigned flags, hid_t fcpl_id, hid_t fapl_id),                  \
    (filename, flags, fcpl_id, fapl_id))                                                                     \
  X(hid_t, H5Fopen, (const char *filename, unsigned flags, hid_t fapl_id), (filename, flags, fapl_id))       \
  X(herr_t, H5Gclose, (hid_t group_id), (group_id))                                                          \
  X(hid_t, H5Gcreate2, (hid_t loc_id, const char *name, hid_t lcpl_id, hid_t gcpl_id, hid_t gapl_id),        \
    (loc_id, name, lcpl_id, gcpl_id, gapl_id))                                                               \
  X(htri_t, H5Lexists, (hid_t loc_id, const char *name, hid_t lapl_id), (loc_id, name, lapl_id))             \
  X(herr_t, H5Ovisit,                                                                                        \
    (hid_t obj_id, H5_index_t idx_type, H5_iter_order_t order, H5O_iterate_t op, void *op_data),             \
    (obj_id, idx_type, order, op, op_data))                                                                  \
  X(herr_t, H5Pclose, (hid_t plist_id), (plist_id))                                                          \
  X(hid_t, H5Pcreate, (hid_t cls_id), (cls_id))                                                              \
  X(int, H5Pget_chunk, (hid_t plist_id, int max_ndims, hsize_t dim[]), (plist_id, max_ndims, dim))           \
  X(H5Z_filter_t, H5Pget_filter2,                                                                            \
    (hid_t plist_id, unsigned idx, unsigned int *flags, size_t *cd_nelmts, unsigned cd_values[],             \
     size_t namelen, char name[], unsigned *filter_config),                                                  \
    (plist_id, idx, flags, cd_nelmts, cd_values, namelen, name, filter_config))                              \
  X(H5D_layout_t, H5Pget_layout, (hid_t plist_id), (plist_id))                                               \
  X(int, H5Pget_nfilters, (hid_t plist_id), (plist_id))                                                      \
  X(herr_t, H5Pset_alignment, (hid_t fapl_id, hsize_t threshold, hsize_t alignment),                         \
    (fapl_id, threshold, alignment))                                                                         \
  X(herr_t, H5Pset_alloc_time, (hid_t plist_id, H5D_alloc_time_t alloc_time), (plist_id, alloc_time))        \
  X(herr_t, H5Pset_chunk, (hid_t plist_id, int ndims, const hsize_t dim[]), (plist_id, ndims, dim))          \
  X(herr_t, H5Pset_deflate, (hid_t plist_id, unsigned level), (plist_id, level))                             \
  X(herr_t, H5Pset_fill_time, (hid_t plist_id, H5D_fill_time_t fill_time), (plist_id, fill_time))            \
  X(herr_t, H5Pset_layout, (hid_t plist_id, H5D_layout_t layout), (plist_id, layout))                        \
  X(herr_t, H5Sclose, (hid_t space_id), (space_id))                                                          \
  X(hid_t, H5Screate, (H5S_class_t type), (type))                                                            \
  X(hid_t, H5Screate_simple, (int rank, const hsize_t dims[], const hsize_t maxdims[]),                      \
    (rank, dims, maxdims))                                                                                   \
  X(int, H5Sget_simple_extent_dims, (hid_t space_id, hsize_t dims[], hsize_t maxdims[]),                     \
    (space_id, dims, maxdims))                                                                               \
  X(int, H5Sget_simple_extent_ndims, (hid_t space_id), (space_id))                                           \
  X(hssize_t, H5Sget_simple_extent_npoints, (hid_t space_id), (space_id))                                    \
  X(herr_t, H5Sselect_hyperslab,                                                                             \
    (hid_t space_id, H5S_seloper_t op, const hsize_t start[], const hsize_t stride[], const hsize_t count[], \
     const hsize_t block[]),                                                                                 \
    (space_id, op, start, stride, count, block))                                                             \
  X(herr_t, H5Tclose, (hid_t type_id), (type_id))                                                            \
  X(hid_t, H5Tcopy, (hid_t type_id), (type_id))                                                              \
  X(htri_t, H5Tequal, (hid_t type1_id, hid_t type2_id), (type1_id, type2_id))                                \
  X(H5T_class_t, H5Tget_class, (hid_t type_id), (type_id))                                                   \
  X(H5T_cset_t, H5Tget_cset, (hid_t type_id), (type_id))                                                     \
  X(H5T_order_t, H5Tget_order, (hid_t type_id), (type_id))                                                   \
  X(H5T_sign_t, H5Tget_sign, (hid_t type_id), (type_id))                                                     \
  X(size_t, H5Tget_size, (hid_t type_id), (type_id))                                                         \
  X(htri_t, H5Tis_variable_str, (hid_t type_id), (type_id))                                                  \
  X(herr_t, H5Tset_cset, (hid_t type_id, H5T_cset_t cset), (type_id, cset))                                  \
  X(herr_t, H5Tset_ebias, (hid_t type_id, size_t ebias), (type_id, ebias))                                   \
  X(herr_t, H5Tset_fields,                                                                                   \
    (hid_t type_id, size_t spos, size_t epos, size_t esize, size_t mpos, size_t msize),                      \
    (type_id, spos, epos, esize, mpos, msize))                                                               \
  X(herr_t, H5Tset_size, (hid_t type_id, size_t size), (type_id, size))                                      \
  X(herr_t, H5free_memory, (void *mem), (mem))                                                               \
  X(herr_t, H5get_libversion, (unsigned *majnum, unsigned *minnum, unsigned *relnum),                        \
    (majnum, minnum, relnum))                                                                                \
  /* end */

// The ID variables <hdf5.h>'s type and property-list macros read (after H5open()).
// clang-format off
#define CKPT_HDF5_IDS(X)                                                                            \
  X(H5T_IEEE_F32LE_g) X(H5T_IEEE_F64LE_g) X(H5T_NATIVE_FLOAT_g) X(H5T_NATIVE_INT64_g) X(H5T_C_S1_g)  \
  X(H5T_STD_I8LE_g) X(H5T_STD_I16LE_g) X(H5T_STD_I32LE_g) X(H5T_STD_I64LE_g)                        \
  X(H5T_STD_U8LE_g) X(H5T_STD_U16LE_g) X(H5T_STD_U32LE_g) X(H5T_STD_U64LE_g)                        \
  X(H5P_CLS_DATASET_CREATE_ID_g) X(H5P_CLS_FILE_ACCESS_ID_g)
// clang-format on

struct RealFunctions {
  herr_t (*H5open)(void) = nullptr;
#define CKPT_HDF5_POINTER(ret, name, params, args) ret(*name) params = nullptr;
  CKPT_HDF5_FUNCTIONS(CKPT_HDF5_POINTER)
#undef CKPT_HDF5_POINTER
};

struct Loaded {
  Status status = Status::ok();
  RealFunctions real;
};

// Takes symbol `name` of the library into `out`; false (and the reason in `status`) where absent.
template <typename Pointer>
bool take(void *library, const char *name, Pointer &out, Status &status) {
  out = reinterpret_cast<Pointer>(::dlsym(library, name));
  if (out) return true;
  status =
      Status::io_error(hdf5::library_name() + " has no symbol " + name + " (built against another HDF5?)");
  return false;
}

Loaded load() {
  Loaded loaded;
  ::dlerror();
  // Local: its symbols do not join the process's global scope, so that nothing loaded later binds
  // to them by accident.
  void *library = ::dlopen(CKPTCHECK_HDF5_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = ::dlerror();
    loaded.status = Status::io_error("HDF5 support needs " + hdf5::library_name() +
                                     ", which could not be loaded: " + (why ? why : "unknown reason"));
    return loaded;
  }
  RealFunctions &real = loaded.real;
  if (!take(library, "H5open", real.H5open, loaded.status)) return loaded;
#define CKPT_HDF5_TAKE(ret, name, params, args) \
  if (!take(library, #name, real.name, loaded.status)) return loaded;
  CKPT_HDF5_FUNCTIONS(CKPT_HDF5_TAKE)
#undef CKPT_HDF5_TAKE
  // The IDs exist once the library is initialised: copied into this file's variables, which the
  // macros read.
  if (real.H5open() < 0) {
    loaded.status = Status::io_error(hdf5::library_name() + ": H5open failed");
    return loaded;
  }
#define CKPT_HDF5_COPY_ID(name)                                  \
  {                                                              \
    const hid_t *id = nullptr;                                   \
    if (!take(library, #name, id, loaded.status)) return loaded; \
    name = *id;                                                  \
  }
  CKPT_HDF5_IDS(CKPT_HDF5_COPY_ID)
#undef CKPT_HDF5_COPY_ID
  // Never unloaded: its handles and atexit work live as long as the process.
  return loaded;
}

const Loaded &loaded() {
  static const Loaded *once = new Loaded(load());  // thread-safe; never destroyed (see above)
  return *once;
}

// What a function returns where the library could not be loaded: every caller checks for it (a
// negative id or status, an error enum value, or a size no check accepts).
template <typename T>
T failure() {
  return static_cast<T>(-1);
}

}  // namespace ckpt::hdf5_loading

// Hidden: never exported from the program, so that a libhdf5 some other library loads at start
// (ckptcheck-train's LibTorch brings one) binds its own references to its own definitions, not to
// these. Inside the program, every reference binds here.
#define CKPT_HDF5_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

#define CKPT_HDF5_ID_VARIABLE(name) CKPT_HDF5_HIDDEN hid_t name = H5I_INVALID_HID;
CKPT_HDF5_IDS(CKPT_HDF5_ID_VARIABLE)
#undef CKPT_HDF5_ID_VARIABLE

CKPT_HDF5_HIDDEN herr_t H5open(void) {
  return ckpt::hdf5_loading::loaded().status.is_ok() ? 0 : -1;
}

#define CKPT_HDF5_DEFINE(ret, name, params, args)                                    \
  CKPT_HDF5_HIDDEN ret name params {                                                 \
    const auto &l = ckpt::hdf5_loading::loaded();                                    \
    return l.status.is_ok() ? l.real.name args : ckpt::hdf5_loading::failure<ret>(); \
  }
CKPT_HDF5_FUNCTIONS(CKPT_HDF5_DEFINE)
#undef CKPT_HDF5_DEFINE

}  // extern "C"

namespace ckpt::hdf5 {

Status load_library() {
  return hdf5_loading::loaded().status;
}

std::string library_name() {
  return CKPTCHECK_HDF5_LIBRARY;
}

}  // namespace ckpt::hdf5
