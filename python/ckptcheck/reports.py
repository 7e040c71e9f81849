"""The results of ckptcheck's calls: small objects over the object the CLI prints with --json, so
`to_dict()` is exactly that object (a copy) and every attribute is one of its fields."""
class _JsonResult:
    """Attributes over one --json object; `to_dict()` returns a copy of it."""

    def __init__(self, data):
        self._data = data

    def to_dict(self):
        import json  # a deep copy of plain JSON; imported here so `import ckptcheck` stays cheap

        return json.loads(json.dumps(self._data))

    def __getitem__(self, key):
        return self._data[key]

    def __eq__(self, other):
        return type(self) is type(other) and self._data == other._data

    __hash__ = None


class Finding(_JsonResult):
    """One error or warning of verify: `code` is one of the stable codes `ckptcheck verify` prints;
    `file` the shard or file it is about ("" for none), `tensor` likewise, `message` one line."""

    code = property(lambda self: self._data["code"])
    file = property(lambda self: self._data["shard"])
    tensor = property(lambda self: self._data["tensor"])
    message = property(lambda self: self._data["message"])

    def __repr__(self):
        where = " ".join(w for w in (self.file, self.tensor) if w)
        return "<Finding [%s]%s: %s>" % (self.code, " " + where if where else "", self.message)

    def __str__(self):
        return "[%s] %s" % (self.code, self.message)


class Report(_JsonResult):
    """What verify found: `ok` (no errors; warnings never fail a checkpoint), `kind` (what the path
    is: native, torch.save, dcp, safetensors, ...), `errors` and `warnings` (Findings), `path`,
    `step` (None where the checkpoint records none), `sealed`, `shards`, `tensors`, `bytes_hashed`, `seconds`. `to_dict()` is the object
    `ckptcheck verify --json` prints."""

    ok = property(lambda self: self._data["ok"])
    kind = property(lambda self: self._data["kind"])
    path = property(lambda self: self._data["path"])
    step = property(lambda self: self._data["step"])
    sealed = property(lambda self: self._data["sealed"])
    shards = property(lambda self: self._data["shards"])
    tensors = property(lambda self: self._data["tensors"])
    bytes_hashed = property(lambda self: self._data["bytes_hashed"])
    seconds = property(lambda self: self._data["seconds"])
    uncommitted = property(lambda self: list(self._data["uncommitted"]))
    errors = property(lambda self: [Finding(f) for f in self._data["errors"]])
    warnings = property(lambda self: [Finding(f) for f in self._data["warnings"]])

    def __bool__(self):
        return self.ok

    def raise_if_failed(self):
        """Raises VerifyError (carrying this report) unless ok; returns the report otherwise."""
        if not self.ok:
            from .errors import VerifyError
            raise VerifyError(self)
        return self

    def __repr__(self):
        return "<Report %s %s (%s): %d errors, %d warnings>" % (
            "PASS" if self.ok else "FAIL", self.path, self.kind, len(self._data["errors"]),
            len(self._data["warnings"]))


class SealResult(_JsonResult):
    """The seal written: `seal` (its path), `files`, `tensors`, `bytes` and `unread` ("file: why"
    for each file whose tensors no reader could list); `to_dict()` is `ckptcheck seal --json`."""

    seal = property(lambda self: self._data["seal"])
    files = property(lambda self: self._data["files"])
    tensors = property(lambda self: self._data["tensors"])
    bytes = property(lambda self: self._data["bytes"])
    unread = property(lambda self: list(self._data["unread"]))

    def __repr__(self):
        return "<SealResult %s: %d files, %d tensors>" % (self.seal, self.files, self.tensors)


class _EveryField(_JsonResult):
    """Every field of the --json object is an attribute (reports whose fields grow with the CLI)."""

    def __getattr__(self, name):
        try:
            return self.__dict__["_data"][name]
        except KeyError:
            raise AttributeError(name) from None


class InspectReport(_EveryField):
    """What inspect found: `ok` (every recorded hash and CRC-32 agrees with the bytes) and the
    fields of `ckptcheck inspect --json` (`to_dict()`), e.g. `tensors`."""

    ok = property(lambda self: self._data["ok"])

    def __repr__(self):
        return "<InspectReport %s>" % ("ok" if self.ok else "MISMATCH")


class DiffReport(_EveryField):
    """What diff found: `identical` (every tensor and every non-tensor value on both sides, tensors
    within tolerance), `headline` ("step 20 vs 15 ..." when the sides are different steps), `values`
    (each differing value: `path`, `a_repr`/`b_repr` as Python's repr, `a_type`/`b_type`, and `a`/`b`
    as JSON, which cannot tell a tuple from a list: read the types) and the fields
    of `ckptcheck diff --json` (`to_dict()`)."""

    identical = property(lambda self: self._data["identical"])
    headline = property(lambda self: self._data.get("headline", ""))
    values = property(lambda self: self._data.get("values", []))

    def __repr__(self):
        return "<DiffReport %s>" % ("identical" if self.identical else "different")
