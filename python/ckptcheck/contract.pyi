import os
from typing import Optional, Union

_Path = Union[str, os.PathLike]

def make_durable(path: _Path) -> None: ...

class Run:
    under_drill: bool
    ckpt_dir: str
    steps: int
    save_every: int
    resume: Optional[str]
    role: Optional[str]
    metrics: Optional[str]
    def __init__(self, *, ckpt_dir: Optional[_Path] = ..., steps: Optional[int] = ...,
                 save_every: Optional[int] = ..., resume: Optional[_Path] = ...) -> None: ...
    def should_save(self, step: int) -> bool: ...
    def log(self, step: int, loss: Optional[float] = ..., **metrics: float) -> None: ...
    def checkpoint(self, step: int, path: _Path) -> None: ...
