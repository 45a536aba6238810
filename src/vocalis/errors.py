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

    def __init__(self, *args, param: str | None = None):
        super().__init__(*args)
        self.param = param  # the option or field at fault, where there is one (server: ``param``)


class InputError(VocalisError, ValueError):
    """Bad text, bad sampling parameters, bad request files."""


class NothingToSpeak(InputError):
    """A text with nothing the model can speak: only emoji, symbols or punctuation, or
    letters of a script the model has none for."""

    code = "nothing_to_speak"


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


class GenerationError(VocalisError):
    """A request failed while it ran (for example its values became NaN or inf); other
    requests are unaffected. Not a mistake in the input: the CLI exits 1, the server 500."""

    http_status = 500
    code = "generation_failed"


class EventsAlreadyRead(VocalisError, RuntimeError):
    """A request's events were asked for again after they were read to their end, or while
    another reader is reading them. Each event is handed out once (audio is not kept for a
    second pass): keep the events as they come, or read ``req.stats`` for the figures. A
    mistake in the calling code, not in a request: the server would answer 500."""

    http_status = 500
    code = "events_already_read"


class HarnessError(VocalisError):
    """The reference harness failed (official package missing, fixture malformed)."""

    code = "reference_error"
