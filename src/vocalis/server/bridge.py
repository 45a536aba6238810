"""From the engine's thread to the event loop: one pump thread per speech request.

The engine produces events on its own thread. A pump thread per request reads them
(:meth:`Request.events` blocks), encodes the audio (PyAV work stays off the event loop)
and hands the bytes to an ``asyncio.Queue`` with ``call_soon_threadsafe``. The queue is
unbounded, so a slow reader never blocks the engine or the other requests (its backlog
is its own audio, a few kB per second).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass

from vocalis.engine.types import AudioChunk, Failed, Finished, RequestStats
from vocalis.audio.encode import Encoder

log = logging.getLogger("vocalis.server")


@dataclass
class Piece:
    """``kind``: ``audio`` (``data`` bytes, ``samples`` count), ``done`` (``stats``),
    ``failed`` (``error``, ``stats``); ``words``: with word timestamps, the words
    (:class:`vocalis.timing.Word`) that ended by this piece."""

    kind: str
    data: bytes = b""
    samples: int = 0
    stats: RequestStats | None = None
    error: BaseException | None = None
    words: list | None = None


class SpeechJob:
    """One engine request's pieces on the event loop. ``generated``: the engine is done
    with it (its last piece is queued), set on the loop, which then calls ``on_generated``
    (if given); ``finished``: the consumer has read its last piece."""

    def __init__(self, request, encoder: Encoder, loop: asyncio.AbstractEventLoop,
                 on_generated=None):
        self.request = request
        self.encoder = encoder
        self.loop = loop
        self.queue: asyncio.Queue[Piece] = asyncio.Queue()
        self.finished = False  # Finished or Failed seen by the consumer
        self.generated = False
        self._on_generated = on_generated
        self._thread = threading.Thread(target=self._pump, daemon=True,
                                        name=f"vocalis-pump-{getattr(request, 'id', '?')}")
        # the engine hands a lone request's first audio over to the event loop, not to
        # the pump (Request.relay_audio)
        self._relayed = getattr(request, "relay_audio", None) is not None
        if self._relayed:
            request.relay_audio()

    def start(self) -> SpeechJob:
        self._thread.start()
        return self

    def cancel(self) -> None:
        self.request.cancel()

    async def next(self) -> Piece:
        piece = await self.queue.get()
        if piece.kind in ("done", "failed"):
            self.finished = True
        elif self._relayed:
            self._relayed = False
            self.request.audio_taken()
        return piece

    def _put(self, piece: Piece) -> bool:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, piece)
            return True
        except RuntimeError:  # the loop is closed: the server is gone
            self.request.cancel()
            return False

    def _pump(self) -> None:
        head = self.encoder.begin()
        try:
            for ev in self.request.events():
                if isinstance(ev, AudioChunk):
                    data = self.encoder.write(ev.samples)
                    if head:
                        data, head = head + data, b""
                    if not self._put(Piece("audio", data, int(ev.samples.shape[0]),
                                           words=ev.words)):
                        return
                elif isinstance(ev, Finished):
                    if ev.stats.cancelled:
                        self.encoder.close()
                        self._put(Piece("done", stats=ev.stats, words=ev.words))
                        return
                    tail = head + self.encoder.end()
                    if tail:
                        self._put(Piece("audio", tail, 0))
                    self._put(Piece("done", stats=ev.stats, words=ev.words))
                    return
                elif isinstance(ev, Failed):
                    self._put(Piece("failed", stats=ev.stats, error=ev.error))
                    return
        except BaseException as e:
            log.error("speech request %s: pump failed", getattr(self.request, "id", "?"),
                      exc_info=e)
            self.request.cancel()
            self._put(Piece("failed", error=e, stats=getattr(self.request, "stats", None)))
        finally:
            self.encoder.close()
            try:
                self.loop.call_soon_threadsafe(self._generated)
            except RuntimeError:  # the loop is closed: the server is gone
                pass

    def _generated(self) -> None:
        self.generated = True
        if self._on_generated is not None:
            self._on_generated()


#: what :func:`receive_unless` returns when the server shuts down (not a client message)
DRAIN = {"type": "vocalis.drain"}


async def receive_unless(ws, draining: asyncio.Event, timeout: float | None) -> dict:
    """The next ASGI message of the WebSocket ``ws``, or :data:`DRAIN` once ``draining``
    is set (the server shuts down: the connection speaks what it has, then closes).

    Raises asyncio.TimeoutError: neither within ``timeout`` seconds."""
    if draining.is_set():
        return DRAIN
    recv = asyncio.ensure_future(ws.receive())
    drain = asyncio.ensure_future(draining.wait())
    try:
        done, _ = await asyncio.wait({recv, drain}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (recv, drain):
            if not t.done():
                t.cancel()
        await asyncio.gather(recv, drain, return_exceptions=True)
    if recv in done:
        return recv.result()
    if drain in done:
        return DRAIN
    raise asyncio.TimeoutError


def unsent(items) -> int:
    """How many of a streaming connection's ``items`` (with ``job``, a :class:`SpeechJob`
    or None, and ``submitting``) are engine requests whose audio is not all sent."""
    return sum(1 for i in items if i.job is not None or i.submitting)


def submit_turn(items, ahead: int, generating: int) -> bool:
    """Whether a streaming connection may give its next sentence to the engine: fewer than
    ``ahead`` of its ``items`` (with ``job``, a :class:`SpeechJob` or None, and
    ``submitting``) wait to be sent (a client that does not read holds the rest back), and
    fewer than ``generating`` are being generated (a second sentence beside the one being
    heard would share the engine's steps with it and slow it down)."""
    busy = sum(1 for i in items if i.submitting or (i.job is not None and not i.job.generated))
    return unsent(items) < ahead and busy < generating


_tasks: set[asyncio.Task] = set()  # notify_soon's tasks, referenced until they end


def notify_soon(cond: asyncio.Condition) -> None:
    """``cond.notify_all()`` from a plain callback on the loop (a task takes the lock)."""
    async def notify():
        async with cond:
            cond.notify_all()

    task = asyncio.get_running_loop().create_task(notify())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
