"""The restore drill's contract in three lines (README, "Drill your own program"):

    run = ckptcheck.contract.Run()                       # CKPTCHECK_* of `ckptcheck drill -- ...`
    ... after each optimizer step:  run.log(step, loss=loss, lr=lr)
    ... if run.should_save(step):   run.checkpoint(step, ckptcheck.torch.save(state, path))

The variables are parsed and the metrics lines written by the library's one implementation
(verifier/drill/program_contract.h), so a Python program and a LibTorch program keep the contract
the same way. Outside a drill, Run() takes its values from its keyword arguments; a value neither
the environment nor the program gave raises UsageError naming both.
"""
import os as _os

from ._engine import native as _library
from .durable import make_durable
from .errors import UsageError

__all__ = ["Run"]

_VARIABLE = {"ckpt_dir": "CKPTCHECK_CKPT_DIR", "steps": "CKPTCHECK_STEPS", "save_every": "CKPTCHECK_SAVE_EVERY"}


class Run:
    """One run of a training program, as `ckptcheck drill -- COMMAND` asked for it.

    Under a drill (CKPTCHECK_CKPT_DIR is set) every value comes from the environment, and a
    missing or malformed variable raises UsageError naming it. Outside a drill the keyword
    arguments give the values (`ckpt_dir`, `steps`, `save_every`; `resume` stays None unless
    given), log() writes nothing, and reading a value nobody gave raises UsageError.

    Attributes: under_drill, ckpt_dir, steps, save_every, resume (the checkpoint to resume from,
    or None on a fresh start), role (reference | subject | resumed | control, or None), metrics
    (the JSON-lines file, or None).
    """

    def __init__(self, *, ckpt_dir=None, steps=None, save_every=None, resume=None):
        drill = _library().drill_run()
        self.under_drill = drill is not None
        if drill is not None:
            self._values = {"ckpt_dir": drill["ckpt_dir"], "steps": drill["steps"],
                            "save_every": drill["save_every"]}
            self.resume = drill["resume"] or None
            self.role = drill["role"] or None
            self.metrics = drill["metrics"]
            self._log = _library().MetricsFile(self.metrics)
        else:
            self._values = {"ckpt_dir": None if ckpt_dir is None else _os.fspath(ckpt_dir), "steps": steps,
                            "save_every": save_every}
            for name in ("steps", "save_every"):
                value = self._values[name]
                if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                    raise UsageError("`%s` must be an int >= 1, got %r" % (name, value))
            self.resume = None if resume is None else _os.fspath(resume)
            self.role = None
            self.metrics = None
            self._log = None

    def _value(self, name):
        value = self._values[name]
        if value is None:
            raise UsageError("run.%s: not under a drill (%s is unset) and Run(%s=...) was not given"
                             % (name, _VARIABLE[name], name))
        return value

    ckpt_dir = property(lambda self: self._value("ckpt_dir"))
    steps = property(lambda self: self._value("steps"))
    save_every = property(lambda self: self._value("save_every"))

    def should_save(self, step):
        """True after each step that is a multiple of save_every."""
        return step > 0 and step % self.save_every == 0

    def log(self, step, loss=None, **metrics):
        """Appends {"step": step, "loss": loss, ...} to the metrics file, flushed at once so a
        SIGKILL loses nothing logged. `loss` is required: the drill compares it at every step. Every value must be a number (a 0-d tensor is fine); the
        drill compares them all between runs except timings (names ending in _ms or _seconds) and
        peak_memory_bytes. Writes nothing outside a drill."""
        if loss is None:
            # The drill's metrics contract needs a loss on every line (it refuses a line without
            # one): say so here, at the call, rather than in a drill that fails later.
            raise UsageError("run.log(%r): pass loss=... (the drill compares the loss at every step; "
                             "other metrics go beside it as keywords)" % (step,))
        values = [("loss", loss)] + list(metrics.items())
        numbers = []
        for name, value in values:
            try:
                numbers.append((name, float(value)))
            except (TypeError, ValueError):
                raise UsageError("run.log: `%s` must be a number, got %r" % (name, value)) from None
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise UsageError("run.log: `step` must be an int >= 0, got %r" % (step,))
        if self._log is not None:
            self._log.step(step, numbers)

    def checkpoint(self, step, path):
        """Announces a checkpoint: makes `path` (a file or a directory) durable first (fsync of
        every file, its directories and the directory holding it), then appends the checkpoint
        event. Call it after the checkpoint is complete under its final name."""
        path = _os.fspath(path)
        if not _os.path.exists(path):
            raise UsageError("run.checkpoint: %s does not exist" % path)
        make_durable(path)
        if self._log is not None:
            self._log.checkpoint(step, _os.path.abspath(path))

