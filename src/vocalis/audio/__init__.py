"""Audio in and out: reading voice prompts, resampling, 16-bit WAV files and streams.

Samples are float32 mono arrays ``[T]`` in ``[-1, 1]``; int16 appears only
when bytes are written (see :mod:`vocalis.audio.wav`).
"""

from vocalis.audio.io import MODEL_SAMPLE_RATE, check_audio_file, read_audio, to_mono_24k
from vocalis.audio.wav import (
    HEADER_BYTES,
    STREAMING_SIZE,
    WavStreamWriter,
    float_to_int16,
    wav_bytes,
    wav_header,
    write_wav,
)

__all__ = [
    "HEADER_BYTES",
    "MODEL_SAMPLE_RATE",
    "STREAMING_SIZE",
    "WavStreamWriter",
    "check_audio_file",
    "float_to_int16",
    "read_audio",
    "to_mono_24k",
    "wav_bytes",
    "wav_header",
    "write_wav",
]
