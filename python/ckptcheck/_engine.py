"""The binding (ckptcheck._native), loaded by the first call that needs it: loading it maps the
library and the shared libraries it links (HDF5 and its curl, OpenSSL, zstd, yaml-cpp), tens of
milliseconds that `import ckptcheck` should not cost a program that may never verify anything."""


def native():
    import importlib  # after the first call, a lookup in sys.modules

    return importlib.import_module("ckptcheck._native")
