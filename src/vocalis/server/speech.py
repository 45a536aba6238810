"""A speech request as the server's front ends (``POST /v1/audio/speech`` and the WebSocket
stream, :mod:`vocalis.server.stream`) share it: the API key check, the text's checks, a
request's plan (voice and family options resolved once, for any number of texts), its
submission to the engine and its settling (row freed, outcome counted).

``state`` is the server's :class:`~vocalis.server.app.ServerState`, ``hosted`` one of its
:class:`~vocalis.server.app.Hosted` models.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass

from vocalis.errors import CapacityError, InputError
from vocalis.options import check_unicode, closest, new_seed
from vocalis.server.errors import APIError, from_exception
from vocalis.server.schemas import SpeechRequest


def header(scope, name: bytes) -> str | None:
    """The value of the request header ``name`` (lower case bytes) in an ASGI ``scope``."""
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def authorized(scope, api_key: str | None) -> bool:
    """True when the server has no key or the request carries it (``Authorization: Bearer``
    or ``x-api-key``)."""
    if api_key is None:
        return True
    auth = header(scope, b"authorization") or ""
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else header(scope, b"x-api-key")
    return bool(token) and hmac.compare_digest(token.encode(), api_key.encode())


def normalize_request(state, tts, body, options: dict) -> bool:
    """Whether this request's text is normalized: its ``normalize`` field, else the server's
    default where the request's language is covered and the model is not exact."""
    if body.normalize is not None:
        return body.normalize
    return bool(getattr(state, "normalize", False)) and tts.normalizes(options)


def check_input(state, text: str, param: str = "input") -> None:
    """The server's checks of a text to speak, before any work: not blank, at most
    ``--max-input-chars``, valid Unicode.

    Raises APIError 400 naming ``param`` (``empty_input``, ``string_above_max_length``,
    ``invalid_text``: not valid Unicode, as the WebSocket endpoints call it)."""
    if not text.strip():
        raise APIError(400, f"{param} is empty: give some words to speak", param=param,
                       code="empty_input")
    if len(text) > state.max_input_chars:
        raise APIError(400, f"{param} is {len(text)} characters; the limit is "
                            f"{state.max_input_chars} (start the server with "
                            "--max-input-chars to change it)", param=param,
                       code="string_above_max_length")
    try:
        check_unicode(text, param, "send the text as valid UTF-8", param)
    except InputError as e:
        raise APIError(400, str(e), param=param, code="invalid_text") from None


def has_words(text: str) -> bool:
    """Whether a piece of a streamed text (a sentence) is worth a request: it holds a
    letter or digit. The streaming endpoints skip the others ("...", an emoji between two
    sentences), and check an utterance made of nothing else with :func:`check_text`, so that
    it is refused as ``POST /v1/audio/speech`` refuses it."""
    return any(c.isalnum() for c in text)


async def wordless_error(plan: "SpeechPlan", worded: bool, wordless: str,
                         sentences) -> APIError | None:
    """For the streaming endpoints: the error ``POST /v1/audio/speech`` answers for a
    streamed text made only of pieces without words (emoji, symbols, punctuation:
    ``wordless``, the pieces skipped so far, then ``sentences``, the pieces now complete),
    with ``param`` ``text``; None when a piece had words (``worded``: one before), when it
    was only white space, or when the model would speak it after all."""
    if worded or any(has_words(s.text) for s in sentences):
        return None
    text = " ".join([wordless, *(s.text for s in sentences)]).strip()
    if not text:
        return None
    try:
        await asyncio.to_thread(check_text, plan, text, "text")
    except Exception as e:
        err = from_exception(e)
        if err.param in ("input", None):
            err.param = "text"
        return err
    return None


@dataclass
class SpeechPlan:
    """A speech request checked and resolved, ready for :func:`submit_speech` (any number of
    texts): the hosted model, the voice, ``seed`` (None: a new one per text), ``speed``, the
    family options (with ``normalize`` when on) and the ``x-vocalis-instructions`` note."""

    hosted: object
    voice: object
    seed: int | None
    speed: float
    options: dict
    instructions_note: str | None = None
    word_timestamps: bool = False


def plan_speech(state, hosted, body: SpeechRequest) -> SpeechPlan:
    """Resolve ``body``'s voice and options for ``hosted`` (blocking: may load a voice).
    Front ends that speak several texts with one configuration (the WebSocket endpoint)
    check once here, then submit each text.

    Raises APIError 400 naming the field (unknown voice, conflicting instructions)."""
    tts = hosted.tts
    # the options first: a misspelled field (vocie) is named before the voice it left out
    options, note = request_options(hosted, body)
    voice = hosted.voices.resolve(body.voice_id())
    if normalize_request(state, tts, body, options):
        options["normalize"] = True
    return SpeechPlan(hosted, voice, body.seed, body.speed, options, note,
                      body.word_timestamps)


def check_plan(plan: SpeechPlan, sample_text: str = "Hello.") -> None:
    """Every check of :meth:`vocalis.api.TTS.submit` that needs no text of the user's
    (speed, seed, the options against the family's schema and rules, the voice, whether
    normalization applies), run on ``sample_text``: a configuration is refused before any
    text arrives.

    Raises APIError 400 naming the field."""
    _check(plan, sample_text, None)


def check_text(plan: SpeechPlan, text: str, param: str = "input") -> None:
    """Every check :func:`submit_speech` makes of ``text`` with ``plan`` (the text and
    options against the family's rules, normalization, the model's tokens: e.g. a text with
    nothing the model can speak), without queueing anything (blocking: tokenizes).

    Raises APIError 400 as :func:`submit_speech` does, ``param`` naming the text."""
    _check(plan, text, param)


def _check(plan: SpeechPlan, text: str, param: str | None) -> None:
    """:func:`check_plan` (``param`` None: the configuration, and the word decoder) or
    :func:`check_text` (the text itself, through the family's ``prepare``; a fault of the
    text is named ``param``)."""
    tts = plan.hosted.tts
    options = dict(plan.options)
    norm = options.pop("normalize", False)
    try:
        text, _, _, checked = plan.hosted.info.check_request(text, plan.voice, plan.seed,
                                                             plan.speed, options)
        text = tts.normalized_text(text, norm, checked)
        if param is None:
            tts.word_decoder(plan.word_timestamps)
        else:
            tts.loaded.prepare(text, plan.voice, checked, plan.seed)
    except InputError as e:
        where = param if param is not None and e.param in ("input", None) \
            else field_of(e.param)
        raise APIError(400, str(e), param=where, code=e.code) from None


def field_of(param: str | None) -> str | None:
    """The request's field name for an engine option (OpenAI's ``instructions``)."""
    return "instructions" if param == "instruct" else param


def submit_speech(state, plan: SpeechPlan, text: str, seed: int, live: bool = False,
                  announced=None):
    """Submit ``text`` with ``plan`` to the engine (blocking); returns the engine request.
    ``live``: see :meth:`vocalis.api.TTS.submit`; ``announced``: the request's
    :meth:`vocalis.api.TTS.expect`, done here as soon as the request is queued or refused.

    Raises APIError: 429 when the queue is full (counted as rejected), 400 naming the field
    the engine's checks refused."""
    tts = plan.hosted.tts
    try:
        # the engine's checks, first under the served id, so that a refusal names the model
        # as the client does (they need no weights; the engine repeats them)
        plan.hosted.info.check_request(text, plan.voice, seed, plan.speed,
                                       {k: v for k, v in plan.options.items()
                                        if k != "normalize"})
        return tts.submit(text, plan.voice, seed, plan.speed,
                          word_timestamps=plan.word_timestamps, live=live, **plan.options)
    except CapacityError as e:
        state.metrics.speech.labels("rejected").inc()
        raise APIError(429, str(e), code=e.code) from None
    except InputError as e:  # the option at fault is named by the API's range check
        raise APIError(400, str(e), param=field_of(e.param), code=e.code) from None
    finally:
        if announced is not None:
            announced.done()


async def submit_async(state, plan: SpeechPlan, text: str, seed: int, live: bool = False,
                       announced=None):
    """:func:`submit_speech` off the event loop. A cancellation of the awaiting task (a
    client gone, the server stopping) cancels the engine request once the worker thread has
    made it, so nothing runs for nobody.

    Raises what :func:`submit_speech` raises, or CancelledError."""
    fut = asyncio.get_running_loop().run_in_executor(None, submit_speech, state, plan, text,
                                                     seed, live, announced)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        fut.add_done_callback(lambda f: f.cancelled() or f.exception() is not None
                              or f.result().cancel())
        raise


async def submit_text(state, plan: SpeechPlan, text: str, cancelled) -> object:
    """:func:`submit_speech` of one text of a streaming connection, off the event loop, as
    a live request (played as it comes: never held back for a burst): the input checked, a new seed unless the plan has one, the request admitted (counted
    until :func:`settle`) and cancelled at once if ``cancelled()`` says the text was dropped
    meanwhile. A cancellation of the awaiting task cancels the request once it exists.

    Raises APIError (a text the server refuses, a full queue, the engine's checks)."""
    check_input(state, text, "text")
    seed = plan.seed if plan.seed is not None else new_seed()
    req = await submit_async(state, plan, text, seed, live=True)
    state.admitted.add(req)
    if cancelled():
        req.cancel()
    return req


def request_options(hosted, body: SpeechRequest) -> tuple[dict, str | None]:
    """The request's model-family options for ``tts.submit`` and the
    ``x-vocalis-instructions`` note: OpenAI's ``instructions`` becomes the family's
    instruction option on models that use it; other models ignore it, and the note says so
    (naming the model by its served id)."""
    tts = hosted.tts
    options = body.options()
    check_field_names(tts, options)
    info = hosted.info
    if "language" in options and "language" not in {o.name for o in tts.family.options}:
        # as the WebSocket's session.config takes it: a model with one language, its name
        language = options.pop("language")
        if not isinstance(language, str):
            raise APIError(400, f"language must be a string such as {info.language!r}, not "
                                f"{type(language).__name__}", param="language",
                           code="invalid_type")
        options.update(language_option(info, language))
    # the family's own name for OpenAI's field (Qwen3-TTS: instruct), given directly
    alias = next((o.name for o in tts.family.options if o.openai == "instructions"), None)
    given = options.get(alias) if alias else None
    if body.instructions and given is not None and given != body.instructions:
        raise APIError(400, f"instructions and {alias} differ: give one of them",
                       param=alias, code="invalid_value")
    instructions = body.instructions or given
    if not instructions:
        return options, None
    if info.instructions and info.instructions_option:
        options.pop(alias, None)
        options[info.instructions_option] = instructions
        return options, None
    options.pop(alias, None)  # the model takes none: dropped, and the note says so
    return options, f"ignored: {hosted.model_id} ({info.title}) has no instruction control"


def language_option(info, language: str) -> dict:
    """The family option that makes ``info``'s model speak ``language`` (a language name of
    the model, case-insensitive; ``auto`` where the model detects); a model with one
    language takes its own name (the vLLM-style WebSocket's ``language``, and the HTTP
    body's for a family without a ``language`` option). Raises APIError 400
    (``language``)."""
    want = language.strip().lower()
    langs = [n for n in info.languages]
    if info.language_option is not None:
        match = next((n for n in langs if n.lower() == want), None)
        if match is not None:
            return {info.language_option: match}
    elif want in (info.language.lower(), "auto"):
        return {}
    speaks = ", ".join(langs) if langs else info.language
    raise APIError(400, f"language {language[:32]!r} is not spoken by {info.name}: use one of "
                        f"{speaks}", param="language", code="invalid_value")


def check_field_names(tts, options: dict, fields=SpeechRequest.model_fields,
                      where: str = "") -> None:
    """A field that is neither the request's nor a family option but close to one of the
    request's own ``fields`` (``vocie``; a WebSocket's ``session.config``: its own fields,
    ``where`` " in session.config") is refused naming both, so that a misspelled optional
    field (``voice``, ``speed``...) is not replaced by its default in silence.

    Raises APIError 400 ``unknown_parameter``."""
    known = {o.name for o in tts.family.options}
    for name in options:
        near = None if name in known else "voice" if name == "speaker" \
            else closest(name, fields)
        if near is not None:
            raise APIError(400, f"unknown parameter {name!r}{where}: did you mean {near!r}?",
                           param=name, code="unknown_parameter")


def settle(state, req, outcome: str) -> None:
    """Once per admitted request: stop its work (a no-op when it has finished), free its
    row and count ``outcome`` (completed, cancelled, failed)."""
    if req not in state.admitted:
        return
    state.admitted.discard(req)
    req.cancel()
    state.metrics.speech.labels(outcome).inc()
