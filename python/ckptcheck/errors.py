"""ckptcheck's exceptions: one family, each with the exit code the CLI gives the same failure."""


class Error(Exception):
    """Any failure of a ckptcheck call. `exit_code` is what `ckptcheck` would exit with: 1 when a
    check failed (the bytes are damaged, the checkpoint was refused), 2 for usage and I/O errors."""

    def __init__(self, message, exit_code=2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(Error, ValueError):
    """An option the call cannot honour (an option a checkpoint's kind cannot honour, a seal that
    already exists, a bad value): where the CLI exits 2 with a usage error."""


class ReadError(Error, OSError):
    """The path cannot be read as a checkpoint at all (missing, unreadable, an unknown format)."""


class DamageError(Error):
    """The bytes are damaged or torn (a truncated file, a corrupt header) so the call cannot go on."""

    def __init__(self, message, exit_code=1):
        super().__init__(message, exit_code)


class VerifyError(Error):
    """A checkpoint failed verify; `report` is the full `Report` (its errors name every finding)."""

    def __init__(self, report):
        first = report.errors[0] if report.errors else None
        what = "%s: %s" % (first.code, first.message) if first else "failed"
        more = " (and %d more)" % (len(report.errors) - 1) if len(report.errors) > 1 else ""
        super().__init__("%s: verify refused it: %s%s" % (report.path, what, more), 1)
        self.report = report
