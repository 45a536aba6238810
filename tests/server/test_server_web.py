"""The web page in real headless Chromium (Debian's ``chromium``, driven by Playwright):
load, type, play while streaming, see TTFA and speed, download, upload a voice."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true")  # CI must not skip: it installs both
try:
    from playwright import sync_api
except ImportError:  # pragma: no cover - vocalis[test] has it
    if IN_CI:
        raise
    pytest.skip("playwright is not installed (pip install -e '.[test]')", allow_module_level=True)
import uvicorn

import vocalis
from vocalis.server import create_app

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():  # pragma: no cover - .ci/run installs it
    if IN_CI:
        raise RuntimeError("chromium is missing in CI: .ci/run installs it with apt-get")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)

SMALL = "english_2m_2026-10"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LONG_TEXT = ("The page plays each piece of audio as soon as it arrives. "
             "It does not wait for the whole answer. It shows the time to first audio. "
             "And it shows how many times faster than real time the speech was made.")


@pytest.fixture(scope="module")
def served(checkpoints, tmp_path_factory):
    ckpt = checkpoints.get(SMALL)
    tts = vocalis.load(str(ckpt), max_batch=4, max_queue=16)
    app = create_app(tts, voices_dir=tmp_path_factory.mktemp("web_voices"),
                     default_voice=str(ckpt / "voice.wav"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield url, ckpt
    server.should_exit = True
    thread.join(15)
    tts.close()


@pytest.fixture(scope="module")
def page(served):
    url, _ = served
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context()
        pg = context.new_page()
        outside = []
        pg.on("request", lambda r: None if r.url.startswith((url, "data:", "blob:"))
              else outside.append(r.url))
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(url + "/")
        yield pg
        assert not outside, f"the page fetched outside resources: {outside}"
        assert not errors, errors
        browser.close()


def _server_pcm_len(url: str, text: str, voice: str, seed: int) -> int:
    body = json.dumps({"model": "tts-1", "input": text, "voice": voice, "seed": seed,
                       "response_format": "pcm"}).encode()
    req = urllib.request.Request(url + "/v1/audio/speech", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(r.read())


def test_speak_plays_while_streaming_and_downloads(page, served):
    url, _ = served
    page.wait_for_function("document.querySelectorAll('#voice option').length > 0")
    assert page.locator("#voice").input_value() == "default"
    page.fill("#text", LONG_TEXT)
    page.fill("#seed", "11")
    page.click("#speak")
    page.wait_for_selector("body[data-state=done]", timeout=60_000)
    assert re.fullmatch(r"\d+ ms", page.inner_text("#ttfa"))
    assert re.fullmatch(r"[\d.]+× real time", page.inner_text("#xrt"))
    assert page.inner_text("#seed-used") == "11"
    st = page.evaluate("window.vocalis")
    assert st["samples"] > 0 and st["chunksScheduled"] >= 2
    assert st["firstPlayMs"] < st["wallMs"]  # playback started before the stream ended
    assert st["ttfaMs"] <= st["firstPlayMs"]
    # the download is the streamed audio as a WAV file, equal to the API's own answer
    size = page.evaluate("fetch(document.getElementById('download').href)"
                         ".then(r => r.arrayBuffer()).then(b => b.byteLength)")
    assert size == 44 + _server_pcm_len(url, LONG_TEXT, "default", 11)
    assert page.get_attribute("#download", "download") == "vocalis.wav"


def test_upload_a_voice_and_speak_with_it(page, served):
    _, ckpt = served
    page.fill("#voice-name", "from_the_page")
    page.set_input_files("#voice-file", str(ckpt / "voice.wav"))
    page.click("#upload-button")
    page.wait_for_function(
        "document.getElementById('upload-status').textContent.includes('ready')",
        timeout=60_000)
    assert page.locator("#voice").input_value() == "from_the_page"
    page.fill("#text", "A new voice.")
    page.click("#speak")
    page.wait_for_selector("body[data-state=done]", timeout=60_000)
    assert page.evaluate("window.vocalis.samples") > 0
    # the same name again: the server's error is shown
    page.fill("#voice-name", "from_the_page")
    page.set_input_files("#voice-file", str(ckpt / "voice.wav"))
    page.click("#upload-button")
    page.wait_for_function(
        "document.getElementById('upload-status').classList.contains('error')", timeout=30_000)
    assert "409" in page.inner_text("#upload-status")


def _speak_in_english(pg, errors: list) -> int:
    """Speak "Hello from the page." in English with seed 4 on a Qwen3 page; close it and
    return the samples it played (no page error allowed)."""
    pg.select_option("#language", "english")
    pg.fill("#text", "Hello from the page.")
    pg.fill("#seed", "4")
    pg.click("#speak")
    pg.wait_for_selector("body[data-state=done]", timeout=60_000)
    samples = pg.evaluate("window.vocalis.samples")
    pg.close()
    assert not errors, errors
    return samples


def test_qwen3_page_offers_language_and_instructions(page, tmp_path):
    """A Qwen3-TTS VoiceDesign server: the page shows languages and an instructions box,
    hides uploads (no cloning), and its request equals the API's audio for the same options."""
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    d = write_random_checkpoint("qwen3-tts/1.7b-voicedesign", tmp_path / "vd", seed=8, tiny=True)
    from tests.server.test_server import Server

    tts = vocalis.load(str(d), max_batch=2)
    server = Server(create_app(tts, voices_dir=tmp_path / "voices"))
    url = server.url
    try:
        pg = page.context.new_page()  # a second page of the module's browser
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(url + "/")
        pg.wait_for_function("!document.getElementById('language-box').hidden")
        assert pg.is_visible("#instructions") and not pg.is_visible("#voice-file")
        assert "english" in pg.locator("#language option").all_inner_texts()
        pg.fill("#instructions", "A bright, fast voice.")
        samples = _speak_in_english(pg, errors)
        ref = tts.synthesize("Hello from the page.", instruct="A bright, fast voice.", language="english",
                             seed=4)
        assert samples == ref.samples.shape[0] > 0
    finally:
        server.stop()
        tts.close()


def test_multi_model_page_switches_model_voices_and_controls(page, served, tmp_path):
    """A server hosting Pocket TTS and a Qwen3-TTS CustomVoice model: the page offers the
    model; choosing the Qwen3 model lists its speakers, shows languages and hides uploads,
    and its request equals the API's audio for the same options."""
    from tests.server.test_server import Server
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    _, ckpt = served
    pocket = vocalis.load(str(ckpt), max_batch=2)
    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=8, tiny=True)
    qwen = vocalis.load(str(d), max_batch=2)
    server = Server(create_app([pocket, qwen], voices_dir=tmp_path / "voices",
                               model_name=["narrator", "speakers"]))
    try:
        pg = page.context.new_page()
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(server.url + "/")
        pg.wait_for_function("!document.getElementById('model-box').hidden")
        assert pg.locator("#model-select option").all_inner_texts() == ["narrator", "speakers"]
        assert pg.is_hidden("#language-box") and pg.is_visible("#voice-file")
        pg.select_option("#model-select", "speakers")
        pg.wait_for_function("[...document.querySelectorAll('#voice option')]"
                             ".some((o) => o.value === 'ryan')")
        assert pg.is_visible("#language-box") and not pg.is_visible("#voice-file")
        pg.select_option("#voice", "ryan")
        samples = _speak_in_english(pg, errors)
        ref = qwen.synthesize("Hello from the page.", speaker="ryan", language="english", seed=4)
        assert samples == ref.samples.shape[0] > 0
    finally:
        server.stop()
        qwen.close()
        pocket.close()


def test_every_model_kind_and_a_switch_leave_no_stale_run(page, served, tmp_path):
    """One server with a Pocket TTS model and the three Qwen3-TTS kinds. Each shows the
    controls its model takes (VoiceDesign: no voice list and no error, a required
    description; Base: uploads with a transcript; CustomVoice: no uploads); switching model
    clears the previous run's figures and download; speed and the download format reach the
    server."""
    from tests.server.test_server import Server
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    _, ckpt = served
    loaded = [vocalis.load(str(ckpt), max_batch=2)]
    for name in ("0.6b-customvoice", "1.7b-voicedesign", "0.6b-base"):
        d = write_random_checkpoint(f"qwen3-tts/{name}", tmp_path / name, seed=3, tiny=True)
        loaded.append(vocalis.load(str(d), max_batch=2))
    server = Server(create_app(loaded, voices_dir=tmp_path / "voices",
                               default_voice=str(ckpt / "voice.wav"),
                               model_name=["pocket", "custom", "design", "base"]))
    try:
        pg = page.context.new_page()
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(server.url + "/")
        pg.wait_for_function("document.querySelectorAll('#voice option').length > 0")
        visible = lambda sel: pg.is_visible(sel)  # noqa: E731
        # Pocket TTS: voices, uploads without a transcript, no languages or instructions
        assert visible("#voice") and visible("#voice-file") and not visible("#ref-text")
        assert not visible("#language") and not visible("#instructions")
        pg.fill("#text", "A first run.")
        pg.fill("#speed", "2")
        pg.fill("#seed", "5")
        pg.click("#speak")
        pg.wait_for_selector("body[data-state=done]", timeout=60_000)
        fast = pg.evaluate("window.vocalis.samples")
        ref = loaded[0].synthesize("A first run.", voice=str(ckpt / "voice.wav"), seed=5, speed=2.0)
        assert fast == ref.samples.shape[0] > 0
        # another format: the same request (same seed) answered whole in that format
        pg.select_option("#format", "mp3")
        with pg.expect_download() as dl:
            pg.click("#download")
        data = Path(dl.value.path()).read_bytes()
        assert dl.value.suggested_filename == "vocalis.mp3" and data[:2] in (b"\xff\xfb", b"\xff\xf3")
        # VoiceDesign: the figures of the Pocket run are gone; no voice list, no error
        pg.select_option("#model-select", "design")
        pg.wait_for_function("document.getElementById('voice-box').hidden")
        for stat in ("#ttfa", "#xrt", "#duration", "#seed-used"):
            assert pg.inner_text(stat) == "–", stat
        assert pg.get_attribute("#download", "aria-disabled") == "true"
        assert visible("#instructions") and not visible("#voice-file")
        assert "error" not in (pg.get_attribute("#status", "class") or "")
        assert "describe the voice" in pg.inner_text("#status")
        listed = json.loads(urllib.request.urlopen(server.url + "/v1/audio/voices?model=design").read())
        assert [v["id"] for v in listed["data"]] == ["default"]
        # CustomVoice: speakers, no uploads; Base: uploads with a transcript
        pg.select_option("#model-select", "custom")
        pg.wait_for_function("[...document.querySelectorAll('#voice option')]"
                             ".some((o) => o.value === 'ryan')")
        assert not visible("#voice-file") and visible("#language")
        pg.select_option("#model-select", "base")
        pg.wait_for_function("!document.getElementById('upload-card').hidden")
        assert visible("#ref-text") and visible("#voice-file")
        assert not errors, errors
        pg.close()
    finally:
        server.stop()
        for t in loaded:
            t.close()
