import os
from typing import Iterable, Optional, Union

from . import contract as contract
from . import torch as torch
from .errors import DamageError as DamageError
from .errors import Error as Error
from .errors import ReadError as ReadError
from .errors import UsageError as UsageError
from .errors import VerifyError as VerifyError
from .reports import DiffReport as DiffReport
from .reports import Finding as Finding
from .reports import InspectReport as InspectReport
from .reports import Report as Report
from .reports import SealResult as SealResult

_Path = Union[str, bytes, os.PathLike]
__version__: str

def verify(path: _Path, *, weights_only: bool = ..., allow_globals: Union[str, Iterable[str]] = ...,
           pubkey: Optional[_Path] = ..., jobs: int = ..., quick: bool = ...) -> Report: ...
def seal(path: _Path, *, key: Optional[_Path] = ..., jobs: int = ...) -> SealResult: ...
def inspect(path: _Path, *, stats: bool = ..., tensor: Optional[str] = ...) -> InspectReport: ...
def diff(a: _Path, b: _Path, *, rtol: float = ..., atol: float = ...) -> DiffReport: ...
