"""Prometheus metrics (one registry per app, so several apps can live in one process).

=====================================  =========  ============================================
``vocalis_http_requests_total``        counter    by ``route`` (template), ``method``, ``status``
``vocalis_speech_requests_total``      counter    by ``outcome``: completed, cancelled (client
                                                  went away or shutdown), failed, rejected (429)
``vocalis_streams_in_flight``          gauge      speech responses being sent
``vocalis_active_rows``                gauge      engine rows generating now
``vocalis_queue_depth``                gauge      requests waiting for a row
``vocalis_max_batch`` / ``_max_queue``  gauge      engine limits
``vocalis_ttfa_seconds``               histogram  submission -> first audio
``vocalis_rtf``                        histogram  wall / audio seconds per finished request
``vocalis_audio_seconds_total``        counter    audio generated and sent
``vocalis_websockets_open``            gauge      open WebSocket connections by ``protocol``
                                                  (``vllm-omni``, ``elevenlabs``)
=====================================  =========  ============================================
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,  # noqa: F401 - re-exported
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

TTFA_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
RTF_BUCKETS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class _EngineCollector:
    def __init__(self, status: Callable[[], dict]):
        self._status = status

    def collect(self):
        try:
            s = self._status()
        except Exception:
            s = {}
        for key, name, doc in (("active_rows", "vocalis_active_rows", "Engine rows generating."),
                               ("queued", "vocalis_queue_depth", "Requests waiting for a row."),
                               ("max_batch", "vocalis_max_batch", "Engine rows (max batch)."),
                               ("max_queue", "vocalis_max_queue", "Engine queue capacity.")):
            if key in s:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], float(s[key]))
                yield g


class Metrics:
    def __init__(self, engine_status: Callable[[], dict]):
        disable_created_metrics()  # the *_created series are noise for a server
        r = self.registry = CollectorRegistry()
        self.http = Counter("vocalis_http_requests", "HTTP requests by route, method and status.",
                            ["route", "method", "status"], registry=r)
        self.speech = Counter("vocalis_speech_requests", "Speech requests by outcome.",
                              ["outcome"], registry=r)
        for outcome in ("completed", "cancelled", "failed", "rejected"):
            self.speech.labels(outcome)
        self.streams = Gauge("vocalis_streams_in_flight", "Speech responses being sent.",
                             registry=r)
        self.ttfa = Histogram("vocalis_ttfa_seconds", "Time from submission to first audio.",
                              buckets=TTFA_BUCKETS, registry=r)
        self.rtf = Histogram("vocalis_rtf", "Real-time factor (wall / audio seconds) of finished "
                             "requests.", buckets=RTF_BUCKETS, registry=r)
        self.audio_seconds = Counter("vocalis_audio_seconds", "Seconds of audio generated.",
                                     registry=r)
        self.websockets = Gauge("vocalis_websockets_open", "Open WebSocket connections by "
                                "protocol.", ["protocol"], registry=r)
        for protocol in ("vllm-omni", "elevenlabs"):
            self.websockets.labels(protocol)
        r.register(_EngineCollector(engine_status))

    def render(self) -> bytes:
        return generate_latest(self.registry)
