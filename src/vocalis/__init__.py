"""vocalis: fast and faithful local text-to-speech."""

import os

from vocalis.errors import (
    CapacityError,
    CheckpointError,
    EventsAlreadyRead,
    GenerationError,
    HarnessError,
    InputError,
    ModelNotFound,
    NothingToSpeak,
    VocalisError,
    VoiceError,
)

__version__ = "0.1.0"

__all__ = [
    "CapacityError",
    "CheckpointError",
    "EventsAlreadyRead",
    "GenerationError",
    "HarnessError",
    "InputError",
    "ModelNotFound",
    "NothingToSpeak",
    "VocalisError",
    "VoiceError",
    "__version__",
    "load",
]


def load(model_id: str | os.PathLike | None = None, device: str = "cpu", **kwargs):
    """Load a model by id or path (see :func:`vocalis.api.load`; None: the default model)."""
    from vocalis.api import load as _load  # torch: `import vocalis` alone does not need it

    return _load(model_id, device=device, **kwargs)
