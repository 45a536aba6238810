"""Reference harness: prove parity with the official implementations.

* :func:`export_fixture` runs the official ``pocket-tts`` package (seeded) and records
  what a porter needs: token ids, voice state, every decoder call's latents, the waveform.
* :func:`replay_fixture` decodes those latents with vocalis's Mimi decoder, with any
  frame grouping.
* :func:`compare` scores a candidate waveform against the reference (cosine > 0.99999,
  equal lengths, finite).

Qwen3-TTS (:mod:`vocalis.reference.qwen3`): ``export`` runs the official ``qwen-tts``
0.1.1 in its own environment (``VOCALIS_QWEN_PYTHON``; :mod:`vocalis.reference.qwen3_official_runner`)
and records prompt embeddings, first-step logits, codes and waveform; ``replay`` rebuilds
them with vocalis and decodes the official codes; ``compare`` checks each against its
threshold.

CLI: ``vocalis reference export|replay|compare`` (:mod:`vocalis.reference.cli`).
The official package is imported only when exporting (``pip install 'vocalis[reference]'``).
"""

from vocalis.reference.compare import COSINE_THRESHOLD, compare
from vocalis.reference.export import export_fixture
from vocalis.reference.replay import Fixture, load_fixture, replay_fixture

__all__ = ["COSINE_THRESHOLD", "Fixture", "compare", "export_fixture", "load_fixture",
           "replay_fixture"]
