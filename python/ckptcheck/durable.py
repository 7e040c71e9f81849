"""fsync, the one way: what makes a file or directory survive a crash once it is complete."""
import os as _os


def fsync(path):
    """fsyncs one file or one directory (its entries)."""
    fd = _os.open(path, _os.O_RDONLY | (_os.O_DIRECTORY if _os.path.isdir(path) else 0))
    try:
        _os.fsync(fd)
    finally:
        _os.close(fd)


def fsync_parent(path):
    """fsyncs the directory that holds `path`, so a rename into it or a new name in it is durable."""
    fsync(_os.path.dirname(_os.path.abspath(path)))


def make_durable(path):
    """fsyncs `path` (a file, or a directory and every file and directory under it) and its parent."""
    if _os.path.isdir(path):
        for dirpath, _, files in _os.walk(path):
            for name in files:
                fsync(_os.path.join(dirpath, name))
            fsync(dirpath)
    else:
        fsync(path)
    fsync_parent(path)
