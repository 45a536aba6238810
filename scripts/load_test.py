#!/usr/bin/env python3
"""Bounded loopback load test for a speech server: TTFA and throughput at N concurrent clients.

    python scripts/load_test.py --url http://127.0.0.1:8000 --concurrency 1,4,16
    python scripts/load_test.py --url http://127.0.0.1:8001 --api pocket   # pocket-tts serve
    python scripts/load_test.py --concurrency 16 --burst --requests-per-client 3
    python scripts/load_test.py --concurrency 16 --burst --text "Hi." --text "A longer one." \
        --voice alloy --voice echo     # request i: text i mod 2, voice i mod 2

``--api openai`` (vocalis and other OpenAI-compatible servers) posts JSON to
``/v1/audio/speech`` with ``response_format=wav`` and a per-request ``seed``;
``--api pocket`` posts the form field ``text`` to the official server's ``/tts`` (WAV, its
default voice, no seed). Both answer a streamed WAV, measured the same way:

* TTFA: request sent -> first audio byte after the WAV header (client side, ms);
* per request: audio seconds (data bytes / 2 / rate) and wall seconds;
* per level: p50/p95 TTFA, aggregate x real time = audio seconds of all requests / wall
  seconds of the level (first request sent -> last byte received), errors.

Bounded: each level runs ``--requests-per-client`` x N requests (after one unmeasured
warm-up request), stops starting new ones after ``--max-seconds``, and every request has a
timeout. Only loopback addresses are accepted as targets.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import socket
import statistics
import struct
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass


@dataclass
class Result:
    ok: bool
    ttfa_ms: float | None = None
    wall_s: float = 0.0
    audio_s: float = 0.0
    status: int = 0
    error: str = ""


def loopback_only(host: str) -> None:
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as e:
        sys.exit(f"error: cannot resolve {host}: {e}")
    for info in infos:
        addr = ipaddress.ip_address(info[4][0].split("%")[0])
        if not addr.is_loopback:
            sys.exit(f"error: {host} resolves to {addr}, which is not a loopback address; this "
                     "script only loads servers on this machine")


class WavReader:
    """Finds the end of a (streaming) WAV header in the first bytes of a body."""

    def __init__(self) -> None:
        self.buf = b""
        self.data_at: int | None = None
        self.rate = 24000

    def feed(self, chunk: bytes) -> int:
        """Returns how many audio (data-chunk) bytes this chunk carries."""
        if self.data_at is not None:
            return len(chunk)
        self.buf += chunk
        pos = 12  # RIFF....WAVE
        while pos + 8 <= len(self.buf):
            cid = self.buf[pos:pos + 4]
            size = struct.unpack("<I", self.buf[pos + 4:pos + 8])[0]
            if cid == b"fmt " and pos + 16 <= len(self.buf):
                self.rate = struct.unpack("<I", self.buf[pos + 12:pos + 16])[0]
            if cid == b"data":
                self.data_at = pos + 8
                return len(self.buf) - self.data_at
            pos += 8 + size + (size & 1)
        return 0


def pick(values: list[str], index: int) -> str:
    """Request ``index``'s text or voice: the options given, in turn."""
    return values[index % len(values)]


def one_request(args, index: int, barrier: threading.Barrier | None = None) -> Result:
    """One request; with ``barrier``, connected first and sent when every client of the
    burst is connected (their requests leave together)."""
    u = urllib.parse.urlsplit(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
    if barrier is not None:
        try:
            conn.connect()
            barrier.wait(args.timeout)
        except (OSError, threading.BrokenBarrierError) as e:
            conn.close()
            return Result(False, error=f"{type(e).__name__}: {e}")
    if args.api == "openai":
        body = {"model": args.model, "input": pick(args.text, index),
                "voice": pick(args.voice, index),
                "response_format": "wav"}
        if args.seed is not None:
            body["seed"] = args.seed + index
        if args.max_frames:
            body["max_frames"] = args.max_frames
        payload = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if args.api_key:
            headers["Authorization"] = f"Bearer {args.api_key}"
        path = "/v1/audio/speech"
    else:
        payload = urllib.parse.urlencode({"text": pick(args.text, index)}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        path = "/tts"
    reader = WavReader()
    audio_bytes = 0
    ttfa = None
    t0 = time.perf_counter()
    try:
        conn.request("POST", path, body=payload, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return Result(False, status=resp.status, wall_s=time.perf_counter() - t0,
                          error=resp.read(300).decode("utf-8", "replace"))
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            n = reader.feed(chunk)
            if n and ttfa is None:
                ttfa = (time.perf_counter() - t0) * 1000
            audio_bytes += n
        wall = time.perf_counter() - t0
        return Result(True, ttfa, wall, audio_bytes / 2 / reader.rate, 200)
    except (OSError, http.client.HTTPException) as e:
        return Result(False, ttfa, time.perf_counter() - t0, error=f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run_level(args, clients: int) -> dict:
    total = args.requests_per_client * clients
    lock = threading.Lock()
    state = {"next": 0}
    results: list[Result] = []
    deadline = time.perf_counter() + args.max_seconds

    barrier = threading.Barrier(clients) if args.burst else None

    def worker():
        if barrier is not None:  # rounds of one request per client, released together
            for k in range(args.requests_per_client):
                with lock:
                    i = state["next"]
                    state["next"] += 1
                r = one_request(args, 1000 * clients + i, barrier)
                with lock:
                    results.append(r)
            return
        while True:
            with lock:
                i = state["next"]
                if i >= total or time.perf_counter() > deadline:
                    return
                state["next"] += 1
            r = one_request(args, 1000 * clients + i)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.max_seconds + args.timeout + 5)
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.ok]
    ttfas = [r.ttfa_ms for r in ok if r.ttfa_ms is not None]
    audio = sum(r.audio_s for r in ok)
    rtfs = [r.wall_s / r.audio_s for r in ok if r.audio_s]
    return {
        "clients": clients, "requests": len(results), "ok": len(ok),
        "errors": len(results) - len(ok),
        "error_samples": sorted({f"{r.status} {r.error}"[:200] for r in results if not r.ok})[:3],
        "ttfa_ms_p50": percentile(ttfas, 0.5), "ttfa_ms_p95": percentile(ttfas, 0.95),
        "ttfa_ms_max": max(ttfas) if ttfas else None,
        "audio_s": audio, "wall_s": wall,
        "aggregate_x_real_time": audio / wall if wall else None,
        "request_rtf_p50": percentile(rtfs, 0.5),
        "mean_audio_s": statistics.mean([r.audio_s for r in ok]) if ok else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--api", choices=("openai", "pocket"), default="openai")
    p.add_argument("--concurrency", default="1,4,16", help="comma-separated client counts")
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--text", action="append",
                   help="text to speak; repeat it to give requests different texts in turn "
                        "(default: two sentences)")
    p.add_argument("--model", default="tts-1")
    p.add_argument("--voice", action="append",
                   help="openai api: voice; repeat it for different voices in turn "
                        "(default: alloy)")
    p.add_argument("--seed", type=int, default=0, help="base seed (openai api); -1 = none")
    p.add_argument("--max-frames", type=int, default=None,
                   help="openai api: fixed frames per text chunk (vocalis extension)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--timeout", type=float, default=300.0, help="per request, seconds")
    p.add_argument("--max-seconds", type=float, default=300.0,
                   help="per level: no new request after this")
    p.add_argument("--out", default=None, help="write the JSON report here")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the unmeasured warm-up request (the server is warm already)")
    p.add_argument("--burst", action="store_true",
                   help="each level: rounds in which every client sends one request at the "
                        "same moment (connected first, released together); TTFA is also "
                        "given as multiples of a lone request's (the median of 5, measured "
                        "first)")
    args = p.parse_args(argv)
    args.text = args.text or ["The quick brown fox jumps over the lazy dog. "
                              "Streaming speech should start right away."]
    args.voice = args.voice or ["alloy"]
    if args.seed is not None and args.seed < 0:
        args.seed = None
    u = urllib.parse.urlsplit(args.url)
    if u.scheme != "http" or not u.hostname:
        sys.exit("error: --url must be http://HOST:PORT")
    loopback_only(u.hostname)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not levels or min(levels) < 1 or max(levels) > 64:
        sys.exit("error: --concurrency takes client counts between 1 and 64")

    if not args.no_warmup:
        warm = one_request(args, 0)
        if not warm.ok:
            sys.exit(f"error: warm-up request failed: {warm.status} {warm.error}")
    report = {"url": args.url, "api": args.api, "text": args.text, "burst": args.burst,
              "requests_per_client": args.requests_per_client, "levels": []}
    lone = None
    if args.burst:
        alone = [one_request(args, i) for i in range(1, 6)]
        lone = percentile([r.ttfa_ms for r in alone if r.ok and r.ttfa_ms is not None], 0.5)
        if lone is None:
            sys.exit("error: the lone requests failed: " + "; ".join(
                f"{r.status} {r.error}"[:200] for r in alone if not r.ok))
        report["lone_ttfa_ms"] = lone
        print(f"lone request: TTFA {lone:.0f} ms (median of 5)")
    print(f"{'clients':>7} {'reqs':>5} {'err':>4} {'TTFA p50':>9} {'TTFA p95':>9} "
          f"{'audio s':>8} {'wall s':>7} {'x real time':>11}"
          + (f" {'p50/lone':>8} {'p95/lone':>8}" if lone else ""))
    for c in levels:
        r = run_level(args, c)
        report["levels"].append(r)

        def ms(v):
            return f"{v:.0f}" if v is not None else "-"

        print(f"{c:>7} {r['requests']:>5} {r['errors']:>4} {ms(r['ttfa_ms_p50']):>9} "
              f"{ms(r['ttfa_ms_p95']):>9} {r['audio_s']:>8.1f} {r['wall_s']:>7.1f} "
              f"{(r['aggregate_x_real_time'] or 0):>11.2f}"
              + (f" {(r['ttfa_ms_p50'] or 0) / lone:>8.1f} {(r['ttfa_ms_p95'] or 0) / lone:>8.1f}"
                 if lone else ""), flush=True)
        for e in r["error_samples"]:
            print(f"        error: {e}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if all(lv["errors"] == 0 for lv in report["levels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
