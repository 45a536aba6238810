"""One exception hierarchy for everything vocalis raises on purpose.

Every message says what was wrong and what to do about it. The CLI maps any
:class:`VocalisError` to exit code 2 and one line; the server maps them to
OpenAI's error envelope (``http_status`` gives the status code).
"""

from __future__ import annotations


class VocalisError(Exception):
    """Base class: a problem the user can fix (input, files, network, capacity)."""

    http_status = 400
    code = "invalid_request"


class InputError(VocalisError, ValueError):
    """Bad text, bad sampling parameters, bad request files."""


class ModelNotFound(VocalisError, LookupError):
    """Unknown model id, missing config/weights file, or weights not available offline."""

    http_status = 404
    code = "model_not_found"


class CheckpointError(VocalisError):
    """A checkpoint whose tensors do not match its config (missing, extra, wrong shape)."""

    code = "invalid_checkpoint"


class VoiceError(VocalisError):
    """Unknown voice name, unreadable audio, or a voice state made for another model."""

    code = "invalid_voice"


class CapacityError(VocalisError):
    """The engine is full (queue or rows); retry later."""

    http_status = 429
    code = "capacity_exceeded"


class HarnessError(VocalisError):
    """The reference harness failed (official package missing, fixture malformed)."""

    code = "reference_error"
