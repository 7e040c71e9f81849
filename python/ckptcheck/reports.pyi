from typing import Any, Dict, List

class Finding:
    code: str
    file: str
    tensor: str
    message: str
    def to_dict(self) -> Dict[str, Any]: ...

class Report:
    ok: bool
    kind: str
    path: str
    step: int
    sealed: bool
    shards: int
    tensors: int
    bytes_hashed: int
    seconds: float
    uncommitted: List[str]
    errors: List[Finding]
    warnings: List[Finding]
    def to_dict(self) -> Dict[str, Any]: ...
    def raise_if_failed(self) -> "Report": ...
    def __bool__(self) -> bool: ...

class SealResult:
    seal: str
    files: int
    tensors: int
    bytes: int
    unread: List[str]
    def to_dict(self) -> Dict[str, Any]: ...

class InspectReport:
    ok: bool
    def to_dict(self) -> Dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any: ...

class DiffReport:
    identical: bool
    headline: str
    values: List[Dict[str, Any]]
    def to_dict(self) -> Dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any: ...
