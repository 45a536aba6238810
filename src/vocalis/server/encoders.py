"""The server's audio encoders: :mod:`vocalis.audio.encode` (shared with ``vocalis generate``)."""

from vocalis.audio.encode import (  # noqa: F401
    FORMATS,
    MEDIA_TYPES,
    AVEncoder,
    Encoder,
    PCMEncoder,
    WAVEncoder,
    WholeFile,
    make_encoder,
)
