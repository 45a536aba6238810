"""A client for a running ``vocalis serve``'s WebSocket endpoint ``/v1/audio/speech/stream``
(vLLM-Omni's streaming-text protocol; see :mod:`vocalis.server.stream`), built on the
``websockets`` package. Give it text as a language model writes it; read the audio as it
is generated::

    import asyncio
    from vocalis.client import SpeechStream

    async def main():
        async with SpeechStream("ws://127.0.0.1:8000/v1/audio/speech/stream",
                                voice="alloy", seed=7) as s:
            for delta in ["Hello th", "ere. How are", " you?"]:
                await s.send_text(delta)
            await s.flush()                      # input.done: speak the rest
            pcm = await s.collect()              # 16-bit mono PCM bytes until session.done
        return pcm

    asyncio.run(main())

Defaults of the session: ``response_format`` ``pcm``, ``stream_audio`` true and
``split_granularity`` ``sentence`` (each sentence spoken as soon as it is complete); any
field of ``session.config`` may be given as a keyword.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from vocalis.errors import VocalisError

DEFAULTS = {"response_format": "pcm", "stream_audio": True, "split_granularity": "sentence"}
PATH = "/v1/audio/speech/stream"  # the server's endpoint (a base URL gets it appended)


class StreamError(VocalisError):
    """The server answered with an ``error`` event (``code``: its code), refused the
    connection (``code``: ``http_<status>``), could not be reached (``unreachable``), did
    not answer as a WebSocket server (``bad_handshake``) or closed the connection first
    (``closed``); ``bad_url``: the URL is none of ``ws://``, ``wss://``, ``http://``,
    ``https://``; ``wrong_endpoint``: the URL is another WebSocket route (an ElevenLabs
    one: its messages are not this protocol's).

    ``http_status``: the refusal's status; 502 or 503 where the server failed, was not
    there or shuts down (``server_shutting_down``: it speaks the text it has, then closes)
    (not a mistake in the request: ``vocalis say`` exits 1 for those, 2 for the others)."""

    code = "stream_error"

    def __init__(self, message: str, code: str | None = None, param: str | None = None,
                 http_status: int | None = None):
        super().__init__(message, param=param)
        if code:
            self.code = code
        if http_status is not None:
            self.http_status = http_status


#: the URL schemes taken: http(s) is the server's own address, spoken to over WebSocket
_SCHEMES = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}


def _ws_url(url) -> str:
    """``url`` as a WebSocket URL (``http://`` becomes ``ws://``, ``https://`` ``wss://``;
    the server's base URL, or its API's ``/v1``, gets :data:`PATH`).

    Raises StreamError (``bad_url``): not a string, another scheme, no host, a bad port."""
    from urllib.parse import urlsplit

    def bad(why: str) -> StreamError:
        return StreamError(f"bad URL {url!r}: {why}; use the server's base URL, "
                           "http://HOST:PORT (or ws://HOST:PORT/v1/audio/speech/stream)",
                           "bad_url")

    if not isinstance(url, str):
        raise bad(f"a URL is a string, not {type(url).__name__}")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as e:
        raise bad(str(e)) from None  # e.g. "Port out of range 0-65535"
    scheme = _SCHEMES.get(parts.scheme.lower())
    if "://" not in url:
        raise bad("it has no scheme (http://, ws://...)")
    if scheme is None:
        raise bad(f"the scheme must be one of ws, wss, http, https, not {parts.scheme!r}")
    if not parts.hostname:
        raise bad("it names no host")
    if parts.path.rstrip("/") in ("", "/v1", PATH):  # the server's base URL (or its API's,
        parts = parts._replace(path=PATH)              # as OpenAI clients take it): the endpoint
    return parts._replace(scheme=scheme).geturl()


def _use_base(url: str) -> str:
    """The fix for a URL that is not the streaming endpoint: the server's base URL (the
    scheme and address of ``url``), or that with :data:`PATH`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    base = f"{parts.scheme}://{parts.netloc}"
    return f"pass the server's base URL, {base} (or {base}{PATH})"


class SpeechStream:
    """One connection: ``async with SpeechStream(url, api_key=..., **config) as s``.

    Args:
        url: ``ws://HOST:PORT/v1/audio/speech/stream`` (``wss://`` behind TLS; ``http://``
            and ``https://`` are taken too), or the server's base URL ``ws://HOST:PORT``.
        api_key: sent as ``Authorization: Bearer`` (servers started with ``--api-key``).
        config: ``session.config`` fields (``voice``, ``model``, ``seed``, ``language``...),
            over :data:`DEFAULTS`.

    Raises (on entering): StreamError when the URL is not a WebSocket or HTTP URL
    (``bad_url``), the server refuses the handshake (401: the key; 403 or 404: no
    WebSocket route there, the message says to pass the server's base URL) or cannot be
    reached (``code`` ``unreachable``, ``http_status`` 503). Reading: StreamError
    ``wrong_endpoint`` when the URL is another protocol's route (an ElevenLabs one).
    """

    def __init__(self, url: str, *, api_key: str | None = None, **config):
        self.url = url
        self.api_key = api_key
        self.config = {**DEFAULTS, **config}
        self.sample_rate: int | None = None  # from the first audio.start
        #: each sentence's seed, in order (audio.start's ``seed``: the given one or the one
        #: drawn for it; None where the server sent none)
        self.seeds: list[int | None] = []
        self._ws = None

    async def __aenter__(self) -> SpeechStream:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

        url = _ws_url(self.url)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        try:
            self._ws = await connect(url, additional_headers=headers, max_size=None)
        except InvalidStatus as e:
            status = e.response.status_code
            try:
                message = json.loads(e.response.body)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = f"the server refused the connection (HTTP {status})"
            if status in (403, 404):  # no WebSocket route there
                message += (f": {self.url!r} is not the server's streaming endpoint; "
                            + _use_base(self.url))
            elif status == 401:
                message += " (api_key=...; vocalis say: --api-key or $VOCALIS_API_KEY)"
            raise StreamError(message, f"http_{status}", http_status=status) from None
        except (InvalidURI, ValueError):
            raise StreamError(f"bad URL {self.url!r}: use ws://HOST:PORT/v1/audio/speech/stream",
                              "bad_url") from None
        except InvalidHandshake as e:  # something answered, but not as a WebSocket server
            raise StreamError(f"cannot connect to {self.url}: no WebSocket server answered "
                              f"there ({e}); is it `vocalis serve`'s /v1/audio/speech/stream?",
                              "bad_handshake", http_status=502) from None
        except OSError as e:  # refused, no such host, timed out
            why = ("connection refused" if isinstance(e, ConnectionRefusedError)
                   else "timed out" if isinstance(e, TimeoutError)
                   else e.strerror or str(e) or type(e).__name__)
            raise StreamError(f"cannot connect to {self.url}: {why} (is `vocalis serve` "
                              "running there?)", "unreachable", http_status=503) from None
        await self._send({"type": "session.config", **self.config})
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._ws is None:
            return
        if exc_type is None:
            await self._ws.close()
        else:
            # Left on an error or a cancel (Ctrl-C): drop the connection at once (the server
            # stops the rows on disconnect). A closing handshake could wait its whole
            # timeout (10 s) behind audio frames this side no longer reads.
            self._ws.transport.abort()

    async def _send(self, obj: dict) -> None:
        await self._ws.send(json.dumps(obj))

    async def send_text(self, text: str) -> None:
        """More text of the current utterance (``input.text``)."""
        await self._send({"type": "input.text", "text": text})

    async def flush(self) -> None:
        """The utterance is complete (``input.done``): its rest is spoken."""
        await self._send({"type": "input.done"})

    async def cancel(self) -> None:
        """Stop speaking now (``input.cancel``); each utterance stopped ends with a
        ``session.done`` whose ``cancelled`` is true."""
        await self._send({"type": "input.cancel"})

    async def close(self) -> None:
        """``session.close``: the server finishes the flushed utterances, then closes."""
        await self._send({"type": "session.close"})

    async def events(self) -> AsyncIterator[dict | bytes]:
        """The server's messages in order: ``bytes`` for audio, a dict for every JSON
        event (``error`` events included), until the connection closes (normally, or after
        an error the server sent before closing).

        Raises StreamError ``wrong_endpoint``: a message that is no event of this protocol
        (no ``"type"``): the URL is another route."""
        from websockets.exceptions import ConnectionClosed

        try:
            async for msg in self._ws:
                if isinstance(msg, bytes):
                    yield msg
                    continue
                try:
                    ev = json.loads(msg)
                except ValueError:
                    ev = None
                if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
                    # another protocol's route (ElevenLabs' answers {"message", "error"}
                    # or {"audio"}): nothing here will ever end the utterance
                    raise StreamError(f"{self.url!r} is not the server's streaming endpoint "
                                      "(it answers in another protocol, e.g. an ElevenLabs "
                                      f"route); {_use_base(self.url)}", "wrong_endpoint")
                if ev.get("type") == "audio.start":
                    self.sample_rate = ev.get("sample_rate") or self.sample_rate
                    self.seeds.append(ev.get("seed"))
                yield ev
        except ConnectionClosed:
            return

    async def collect(self, on_audio=None, on_error=None) -> bytes:
        """The audio of the next utterance, up to its ``session.done``; ``on_audio(bytes)``
        is called with each frame as it arrives. An ``error`` event (a sentence the server
        refused; it speaks the rest) goes to ``on_error(StreamError)`` and the utterance
        goes on; without ``on_error`` the first one is raised at the utterance's end, so
        that the next ``collect`` starts at the next utterance.

        Raises StreamError: that first error, or the connection ended first (with the error
        that ended it, if the server sent one)."""
        out = bytearray()
        first = last = None
        async for msg in self.events():
            if isinstance(msg, bytes):
                out.extend(msg)
                if on_audio is not None:
                    on_audio(msg)
            elif msg.get("type") == "error":
                code = msg.get("code")
                last = StreamError(msg.get("message", "error"), code, msg.get("param"),
                                   http_status=503 if code == "server_shutting_down" else None)
                if on_error is not None:
                    on_error(last)
                elif first is None:
                    first = last
            elif msg.get("type") == "session.done":
                if first is not None:
                    raise first
                return bytes(out)
        raise first or last or StreamError("the server closed the connection before "
                                           "session.done", "closed", http_status=502)


async def speak(url: str, pieces, *, api_key: str | None = None, **config) -> bytes:
    """Speak the text ``pieces`` (an iterable or async iterable of str) as one utterance
    and return its audio (16-bit mono PCM at the model's rate, by default).

    Raises StreamError (see :class:`SpeechStream`)."""
    async with SpeechStream(url, api_key=api_key, **config) as s:
        if hasattr(pieces, "__aiter__"):
            async for p in pieces:
                await s.send_text(p)
        else:
            for p in pieces:
                await s.send_text(p)
        await s.flush()
        return await s.collect()


__all__ = ["DEFAULTS", "SpeechStream", "StreamError", "speak"]
