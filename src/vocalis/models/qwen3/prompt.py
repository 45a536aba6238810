"""Talker prompt embeddings for every Qwen3-TTS mode, as the official ``qwen-tts==0.1.1``
builds them (``modeling_qwen3_tts.py:2022-2238`` ``generate``, ``1968-2019``
``generate_icl_prompt``; defaults from ``inference/qwen3_tts_model.py``, cited as
``model.py:LINE``).

Inputs are token ids of the official templates (tokenized by the caller):

- ``input_ids [1, n]``: ``"<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n"``
  (``model.py:269-270``); role = ``[:, :3]``, text = ``[:, 3:-5]``;
- ``instruct_ids [1, m]``: ``"<|im_start|>user\\n{instruct}<|im_end|>\\n"`` (``model.py:275-276``), used whole;
- ``ref_ids [1, r]``: ``"<|im_start|>assistant\\n{ref_text}<|im_end|>\\n"`` (``model.py:272-273``);
  text = ``[:, 3:-2]``.

With ``T(x)`` = text projection of the text embedding and ``E(x)`` the codec embedding,
the codec prefix is ``[think, think_bos, lang, think_eos]`` (or ``[nothink, think_bos,
think_eos]`` for ``auto``), then the speaker row (CustomVoice: ``E(spk_id)``; Base: the
x-vector, in x-vector and ICL modes alike), then ``[pad, bos]``. Each text-track slice is
projected exactly as the official groups it, so results match bit for bit in fp32.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import torch

from vocalis.errors import InputError
from vocalis.models.qwen3.talker import Talker
# the official prompt texts (qwen_tts/inference/qwen3_tts_model.py:269-276), one definition
from vocalis.models.qwen3.text import assistant_text, instruct_text  # noqa: F401
from vocalis.models.qwen3.text import ref_text as ref_text_template  # noqa: F401


@dataclass
class TalkerPrompt:
    """``prefill [1, L, H]`` fed at once; ``trailing [1, N, H]``: text-track vector added to
    decode step t < N (``modeling:1689-1692``); ``tts_pad [1, 1, H]`` added after that.
    ``trailing`` is a :class:`FedText` while a streamed text is still arriving."""

    prefill: torch.Tensor
    trailing: torch.Tensor | FedText
    tts_pad: torch.Tensor

    def text_ready(self, t: int) -> bool:
        """Whether decode step ``t``'s text-track vector is known (a fed text's token t
        may not have arrived yet)."""
        return not isinstance(self.trailing, FedText) or self.trailing.ready(t)

    def text_at(self, t: int) -> torch.Tensor:
        """The text-track vector ``[1, 1, H]`` of decode step ``t`` (once :meth:`text_ready`)."""
        row = self.trailing.at(t) if isinstance(self.trailing, FedText) else (
            self.trailing[:, t:t + 1] if t < self.trailing.shape[1] else None)
        return self.tts_pad if row is None else row


class FedText:
    """The trailing text of a streaming-text prompt (``non_streaming_mode=False``) whose text
    is still arriving: the talker takes one text token per frame, so step ``t`` needs only
    token ``t + 1`` of the text (token 0 rides on the prompt's codec BOS). A row whose next
    token has not come waits (:meth:`ready` is False) with everything untouched, so its codes
    are those of the whole text given at once, whatever the arrival times.

    :meth:`push` (the caller's thread) embeds new ids, :meth:`close` appends ``tts_eos``;
    the engine's thread reads. Both this and the whole-text prompt project through
    :meth:`Talker.text_rows`, so each token gets the same bits either way (for models loaded
    without ``exact``; see :attr:`Talker.min_text_rows`)."""

    def __init__(self, talker: Talker, tts_eos: torch.Tensor):
        self._talker = talker
        self._eos = tts_eos
        self._rows: list[torch.Tensor] = []
        self.closed = False
        self.guard: int | None = None  # set at close
        self._lock = threading.Lock()

    def push(self, ids: list[int]) -> None:
        if not ids:
            return
        with torch.inference_mode():
            out = self._talker.text_rows(ids)
        rows = [out[:, i:i + 1] for i in range(len(ids))]
        with self._lock:
            if self.closed:
                raise InputError("the text was already closed", param="input")
            self._rows.extend(rows)

    def close(self, guard: int | None = None) -> None:
        """The text is complete: ``tts_eos`` follows it. ``guard``: the runaway guard's frame
        limit for the whole text, now that its length is known (None: none)."""
        with self._lock:
            if not self.closed:
                self._rows.append(self._eos)
                self.guard = guard
                self.closed = True

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def tokens(self) -> int:
        """Text tokens pushed so far (``tts_eos`` not counted)."""
        with self._lock:
            return len(self._rows) - int(self.closed)

    def ready(self, t: int) -> bool:
        return self.closed or t < len(self._rows)

    def at(self, t: int) -> torch.Tensor | None:
        """Row ``t`` (``[1, 1, H]``), or None past the closed text (``tts_pad`` then)."""
        with self._lock:
            return self._rows[t] if t < len(self._rows) else None


def supported_languages(talker: Talker) -> list[str]:
    """``auto`` plus the config's languages without the dialects (``modeling:1830-1833``)."""
    return ["auto"] + [k for k in talker.spec.languages if "dialect" not in k]


def _language_id(talker: Talker, language: str, speaker: str | None) -> int | None:
    """Codec language id, ``None`` for ``auto`` (``modeling:2110-2122``): a dialect speaker
    (``spk_is_dialect[speaker]`` not False) turns ``chinese``/``auto`` into its dialect."""
    spec, lang = talker.spec, language.lower()
    if lang not in supported_languages(talker):
        raise InputError(f"unknown language {language!r}; this model takes: {', '.join(supported_languages(talker))}",
                         param="language")
    lang_id = None if lang == "auto" else spec.languages[lang]
    if speaker and lang in ("chinese", "auto") and spec.speaker_dialects.get(speaker.lower(), False) is not False:
        lang_id = spec.languages[spec.speaker_dialects[speaker.lower()]]
    return lang_id


@torch.no_grad()
def build_prompt(talker: Talker, input_ids: torch.Tensor, *, language: str = "auto",
                 speaker: str | None = None, xvector: torch.Tensor | None = None,
                 instruct_ids: torch.Tensor | None = None, ref_ids: torch.Tensor | None = None,
                 ref_codes: torch.Tensor | None = None, non_streaming_mode: bool,
                 feed: bool = False) -> TalkerPrompt:
    """Prompt of one request, mode given by the arguments (no defaults applied here).

    ``speaker``: CustomVoice speaker name (case-insensitive). ``xvector [H]``: Base speaker
    embedding. ``ref_ids`` + ``ref_codes [T_ref, 16]``: Base in-context mode (needs
    ``xvector`` too). ``instruct_ids``: prepended text-only block.
    ``feed``: the text is streamed in (streaming-text layout, not in-context):
    ``input_ids`` holds the role and the first text token only, and the trailing text is a
    :class:`FedText` to push the rest into.
    Raises :class:`InputError` for an unknown speaker or language."""
    spec = talker.spec
    dev = talker.device
    ids = lambda xs: torch.tensor([xs], dtype=torch.long, device=dev)  # noqa: E731
    if speaker is not None and speaker.lower() not in spec.speakers:
        raise InputError(f"unknown speaker {speaker!r}; this model has: {', '.join(spec.speakers) or 'none'}",
                         param="speaker")
    if feed and (non_streaming_mode or ref_codes is not None):
        raise InputError("streamed text needs the streaming-text layout (non_streaming_mode "
                         "false) and no in-context reference (use xvector_only)",
                         param="non_streaming_mode" if non_streaming_mode else "ref_text")
    lang_id = _language_id(talker, language, speaker)
    # modeling:2124-2133: the three specials projected together, then split.
    specials = ids([spec.tts_bos_id, spec.tts_eos_id, spec.tts_pad_id])
    tts_bos, tts_eos, tts_pad = talker.text_embed(specials).chunk(3, dim=1)
    # modeling:2135-2175
    head = ([spec.codec_nothink_id, spec.codec_think_bos_id, spec.codec_think_eos_id] if lang_id is None else
            [spec.codec_think_id, spec.codec_think_bos_id, lang_id, spec.codec_think_eos_id])
    codec = [talker.codec_embed(ids(head))]
    if speaker is not None:
        codec.append(talker.codec_embed(torch.tensor(spec.speakers[speaker.lower()], device=dev)).view(1, 1, -1))
    elif xvector is not None:  # modeling:2102-2104 (x-vector and ICL modes)
        codec.append(xvector.to(talker.dtype).view(1, 1, -1))
    codec.append(talker.codec_embed(ids([spec.codec_pad_id, spec.codec_bos_id])))
    codec = torch.cat(codec, dim=1)
    # modeling:2177-2187: role (text only), then (N-2) tts_pad + tts_bos over codec[:-1]
    parts = [] if instruct_ids is None else [talker.text_embed(instruct_ids)]  # modeling:2076-2080
    parts.append(talker.text_embed(input_ids[:, :3]))
    parts.append(torch.cat((tts_pad.expand(-1, codec.shape[1] - 2, -1), tts_bos), dim=1) + codec[:, :-1])
    if ref_codes is not None:  # modeling:2189-2197 -> generate_icl_prompt (1968-2019)
        if ref_ids is None or xvector is None:
            raise InputError("in-context cloning needs ref_text and the reference speaker embedding", param="ref_text")
        icl, trailing = _icl(talker, input_ids[:, 3:-5], ref_ids[:, 3:-2], ref_codes.to(dev), tts_pad, tts_eos,
                             non_streaming_mode)
        parts.append(icl)
    elif non_streaming_mode:  # modeling:2203-2227
        text = talker.text_embed(input_ids[:, 3:-5])
        n = input_ids[:, 3:-5].shape[1]
        parts.append(torch.cat((text, tts_eos), dim=1) + talker.codec_embed(ids([spec.codec_pad_id] * (n + 1))))
        parts.append(tts_pad + talker.codec_embed(ids([spec.codec_bos_id])))
        trailing = tts_pad
    else:  # modeling:2199-2202 and 2228-2233: first text token rides on codec bos
        parts.append(talker.text_embed(input_ids[:, 3:4]) + codec[:, -1:])
        trailing = FedText(talker, tts_eos) if feed else \
            torch.cat((talker.text_rows(input_ids[0, 4:-5].tolist()), tts_eos), dim=1)
    return TalkerPrompt(torch.cat(parts, dim=1), trailing, tts_pad)


def _icl(talker: Talker, text_id, ref_id, ref_codes, tts_pad, tts_eos, non_streaming_mode):
    """``generate_icl_prompt`` (``modeling:1968-2019``): text track ``[T(ref), T(text),
    T(tts_eos)]`` (T1), codec track ``[E(bos), frame sums of ref_codes]`` (T2)."""
    spec = talker.spec
    dev = text_id.device
    text = torch.cat([talker.text_embed(torch.cat([ref_id, text_id], dim=-1)), tts_eos], dim=1)
    frames = talker.frame_embed(ref_codes)[None]
    codec = torch.cat([talker.codec_embed(torch.tensor([[spec.codec_bos_id]], device=dev)), frames], dim=1)
    t1, t2 = text.shape[1], codec.shape[1]
    if non_streaming_mode:
        pad = talker.codec_embed(torch.tensor([[spec.codec_pad_id] * t1], device=dev))
        return torch.cat([text + pad, codec + tts_pad], dim=1), tts_pad
    if t1 > t2:
        return text[:, :t2] + codec, text[:, t2:]
    return torch.cat([text] + [tts_pad] * (t2 - t1), dim=1) + codec, tts_pad


# --- the official methods' defaults and checks ------------------------------------------

def custom_voice_prompt(talker: Talker, input_ids: torch.Tensor, speaker: str, language: str | None = None,
                        instruct_ids: torch.Tensor | None = None, non_streaming_mode: bool = True,
                        feed: bool = False) -> TalkerPrompt:
    """``generate_custom_voice`` (``model.py:732-840``): language ``None`` → ``auto``,
    ``non_streaming_mode`` True; on 0.6B the official drops ``instruct`` silently
    (``model.py:799-800``): here too, with a :class:`UserWarning`."""
    _need_type(talker, "custom_voice")
    if not speaker:
        raise InputError(f"a speaker is required; this model has: {', '.join(talker.spec.speakers)}", param="speaker")
    if instruct_ids is not None and talker.spec.model_size in "0b6":
        warnings.warn("Qwen3-TTS 0.6B CustomVoice ignores instruct (as the official package does)", stacklevel=2)
        instruct_ids = None
    return build_prompt(talker, input_ids, language=language or "auto", speaker=speaker,
                        instruct_ids=instruct_ids, non_streaming_mode=non_streaming_mode, feed=feed)


def voice_design_prompt(talker: Talker, input_ids: torch.Tensor, instruct_ids: torch.Tensor,
                        language: str | None = None, non_streaming_mode: bool = True,
                        feed: bool = False) -> TalkerPrompt:
    """``generate_voice_design`` (``model.py:637-730``): language ``None`` → ``auto``,
    ``non_streaming_mode`` True. vocalis requires the instruct (the official would run
    without one when it is empty)."""
    _need_type(talker, "voice_design")
    if instruct_ids is None:
        raise InputError("VoiceDesign needs an instruct (a description of the voice)", param="instruct")
    return build_prompt(talker, input_ids, language=language or "auto", instruct_ids=instruct_ids,
                        non_streaming_mode=non_streaming_mode, feed=feed)


def voice_clone_prompt(talker: Talker, input_ids: torch.Tensor, xvector: torch.Tensor, language: str | None = None,
                       ref_ids: torch.Tensor | None = None, ref_codes: torch.Tensor | None = None,
                       non_streaming_mode: bool = False, feed: bool = False) -> TalkerPrompt:
    """``generate_voice_clone`` (``model.py:470-635``): language ``None`` → ``auto``,
    ``non_streaming_mode`` False. ``ref_ids`` and ``ref_codes`` both given → in-context
    mode; neither → x-vector only."""
    _need_type(talker, "base")
    if (ref_ids is None) != (ref_codes is None):
        raise InputError("in-context cloning needs both ref_text and the reference codes; "
                         "pass neither for x-vector-only cloning", param="ref_text")
    return build_prompt(talker, input_ids, language=language or "auto", xvector=xvector, ref_ids=ref_ids,
                        ref_codes=ref_codes, non_streaming_mode=non_streaming_mode, feed=feed)


def _need_type(talker: Talker, kind: str) -> None:
    if talker.spec.model_type != kind:
        raise InputError(f"this is a Qwen3-TTS {talker.spec.model_type} model; the mode needs a {kind} model")
