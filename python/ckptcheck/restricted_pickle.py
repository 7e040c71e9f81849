"""A pickle module whose Unpickler resolves only allowlisted globals: what ckptcheck.torch.load
hands torch's readers on a torch without a usable weights-only mode.

torch 1.13's torch.load(weights_only=True) cannot read a float (its unpickler lacks the BINFLOAT
opcode), so it refuses every optimizer state_dict (lr, betas, eps). The classic restricted
unpickler (Python's pickle docs, "Restricting Globals") keeps the same promise: find_class returns
only the objects of the allowlist, so the pickle can construct and call nothing else, and verify's
gate has already refused any other global before torch saw the file.
"""
import pickle as _pickle
import types as _types

# Python 2 names pickle protocol 2 still carries, as Python 3's Unpickler maps them (fix_imports).
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def restricted_pickle_module(allowed):
    """A module-like object with Unpickler and load, resolving only `allowed` ("module.name" -> object)."""

    # Python's own unpickler (pickle._Unpickler), whose opcodes can be overridden: find_class alone
    # lets BUILD set attributes of an allowlisted *class* (BUILD on collections.Counter with a dict
    # state is setattr(Counter, ...), patching it for the whole process), which torch's weights-only
    # unpickler and verify's gate both refuse.
    class Unpickler(_pickle._Unpickler):
        dispatch = dict(_pickle._Unpickler.dispatch)

        def find_class(self, module, name):
            full = "%s.%s" % (_PYTHON2_MODULES.get(module, module), name)
            if full in allowed:
                return allowed[full]
            raise _pickle.UnpicklingError(
                "pickle global %r is not allowed: not on the weights-only allowlist nor in `allow_globals`" % full)

        def load_build(self):
            target = self.stack[-2]
            if isinstance(target, (type, _types.ModuleType, _types.FunctionType, _types.BuiltinFunctionType)):
                raise _pickle.UnpicklingError(
                    "BUILD on %r would set attributes of a class or function, not of an object the pickle "
                    "made: refused" % (target,))
            return _pickle._Unpickler.load_build(self)

    Unpickler.dispatch[_pickle.BUILD[0]] = Unpickler.load_build

    def load(file, **kwargs):
        return Unpickler(file, **kwargs).load()

    return _types.SimpleNamespace(__name__="ckptcheck.restricted_pickle", Unpickler=Unpickler, load=load)
