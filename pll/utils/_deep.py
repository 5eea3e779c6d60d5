"""PyTorch, which pll's deep learners need, behind the ``deep`` extra: one line naming it when it is missing."""

from __future__ import annotations

from ..errors import InvalidParameterError, MissingExtraError

EXTRA = "deep"
DEVICES = ("cpu", "cuda", "auto")
"""What a deep learner's ``device`` parameter names: the CPU, the (first) GPU, or a GPU where one is present; or a
PyTorch device string such as ``"cuda:1"``."""


def networks(what):
    """:mod:`pll.utils._mlp` (the networks and their optimiser), imported now; ``what`` is named if PyTorch is missing."""
    try:
        from . import _mlp
    except ModuleNotFoundError as error:
        if error.name != "torch":
            raise
        raise MissingExtraError(
            f"{what} needs the '{EXTRA}' extra (PyTorch): pip install 'pll-reject[{EXTRA}]'"
        ) from None
    return _mlp


def resolve_device(device, what):
    """The ``torch.device`` a deep learner named ``what`` trains on; a GPU that is not there is refused in one line."""
    networks(what)
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidParameterError(
            f"{what}: device={device!r} is not a device; use 'cpu', 'cuda', 'cuda:N' or 'auto'"
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidParameterError(f"{what}: device={device!r}, but PyTorch sees no GPU here; use device='cpu' or 'auto'")
    if resolved.type not in ("cpu", "cuda"):
        raise InvalidParameterError(f"{what}: device={device!r} is not supported; use 'cpu', 'cuda', 'cuda:N' or 'auto'")
    return resolved
