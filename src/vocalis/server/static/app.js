// vocalis web page: streams /v1/audio/speech as raw PCM (s16le mono) and plays each chunk
// with Web Audio as soon as it arrives. No external resources: it works offline.
"use strict";

const $ = (id) => document.getElementById(id);
const RATE_FALLBACK = 24000;

// Exposed for tests and the curious: what the last request did.
const vocalis = (window.vocalis = {
  state: "idle", ttfaMs: null, firstPlayMs: null, wallMs: null, xRealTime: null, samples: 0,
  chunksScheduled: 0, seed: null, error: null,
});

let audioCtx = null;
let controller = null;
let downloadUrl = null;
let modelId = null;  // the chosen model's id (from /health), else "tts-1" (the default model)
let models = [];  // the served models and what each accepts (from /health)
let current = {};  // what the chosen model accepts (its entry of /health)

function setState(state) {
  vocalis.state = state;
  document.body.dataset.state = state;
  $("speak").disabled = state === "streaming";
  $("stop").disabled = state !== "streaming";
}

function status(el, text, isError = false) {
  el.textContent = text;
  el.classList.toggle("error", isError);
}

function headers(extra = {}) {
  const key = $("api-key").value.trim();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function errorMessage(resp) {
  try {
    const body = await resp.json();
    if (body && body.error && body.error.message) return `${resp.status}: ${body.error.message}`;
  } catch (_) { /* not JSON */ }
  return `HTTP ${resp.status}`;
}

async function loadVoices(select) {
  const query = models.length > 1 && modelId ? `?model=${encodeURIComponent(modelId)}` : "";
  const resp = await fetch(`/v1/audio/voices${query}`, { headers: headers() });
  if (!resp.ok) { status($("status"), await errorMessage(resp), true); return; }
  const body = await resp.json();
  const box = $("voice");
  const keep = select || box.value;
  box.replaceChildren();
  for (const v of body.voices) {
    const opt = document.createElement("option");
    opt.value = v.id;
    opt.textContent = v.type === "custom" ? `${v.name} (custom)` : v.name;
    box.append(opt);
  }
  if (keep && [...box.options].some((o) => o.value === keep)) box.value = keep;
  if (current.needs_voice === false) {
    status($("status"), "This model has no voices: describe the voice in Instructions.");
  } else if (!box.options.length) {
    status($("status"), current.cloning === false ? "This model has no voices."
      : "This model has no voices yet: upload one below.", true);
  } else {
    status($("status"), "Ready.");
  }
}

// What a request to the chosen model may carry (from /health: its capabilities): languages
// to choose from, instructions (a voice description or a style), voices or none, uploads
// (with a transcript where the model takes one).
function applyModel(info) {
  current = info;
  modelId = info.id || info.model || null;
  document.title = modelId ? `vocalis · ${modelId}` : "vocalis";
  $("model").textContent = models.length > 1 ? `${models.length} models` : (modelId || "");
  const langs = info.languages && info.languages.length ? info.languages : null;
  $("language").replaceChildren(...(langs || []).map((l) => new Option(l, l)));
  $("language-box").hidden = !langs;
  $("instructions-box").hidden = !info.instructions;
  $("instructions-label").textContent = info.needs_voice === false
    ? "Voice description (required): who speaks, and how"
    : "Instructions (the voice or the way to speak, in words)";
  $("voice-box").hidden = info.needs_voice === false;
  $("ref-text-box").hidden = !info.clone_transcript;
  $("upload-card").hidden = info.cloning === false;
  resetRun();
}

// A new model (or a new run): nothing on screen belongs to an earlier one.
function resetRun() {
  for (const id of ["ttfa", "xrt", "duration", "seed-used"]) $(id).textContent = "–";
  Object.assign(vocalis, { ttfaMs: null, firstPlayMs: null, wallMs: null, xRealTime: null,
                           samples: 0, chunksScheduled: 0, seed: null, error: null });
  resetDownload();
}

// /health names the models only to callers with the key (when the server has one): a bare
// {"status": "ok"} means a key is needed.
async function loadInfo() {
  try {
    const resp = await fetch("/health", { headers: headers() });
    const info = await resp.json();
    models = info.models || (info.model ? [{ ...info, id: info.model }] : []);
    const select = $("model-select");
    select.replaceChildren(...models.map((m) => new Option(m.id, m.id)));
    $("model-box").hidden = models.length < 2;
    if (models.length) applyModel(models[0]);
    if (info.max_input_chars) $("text").maxLength = info.max_input_chars;
    if (info.auth || !("model" in info)) $("auth").open = true;
  } catch (_) { /* the page still works without it */ }
}

let lastBody = null;  // the last request, for the download in another format

// The request the controls describe (the chosen model's voice, language, instructions,
// speed), in ``format``.
function requestBody(format) {
  const body = { model: modelId || "tts-1", input: $("text").value,
                 voice: $("voice-box").hidden ? "default" : ($("voice").value || "default"),
                 response_format: format };
  if (!$("language-box").hidden && $("language").value !== "auto") {
    body[current.language_option || "language"] = $("language").value;
  }
  const instructions = $("instructions").value.trim();
  if (!$("instructions-box").hidden && instructions) body.instructions = instructions;
  const speed = Number($("speed").value);
  if (speed && speed !== 1) body.speed = speed;
  return body;
}

// Download: WAV is what was played; another format is the same request (same seed: the
// same audio) answered whole by the server in that format.
async function download(event) {
  const format = $("format").value;
  if (format === "wav" || !lastBody) return;  // the link's own WAV
  event.preventDefault();
  try {
    const body = { ...lastBody, response_format: format, seed: Number(vocalis.seed), stream: false };
    const resp = await fetch("/v1/audio/speech", { method: "POST", body: JSON.stringify(body),
      headers: headers({ "Content-Type": "application/json" }) });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    const url = URL.createObjectURL(await resp.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = `vocalis.${{ opus: "ogg", aac: "aac" }[format] || format}`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (err) {
    status($("status"), String(err.message || err), true);
  }
}

function wavBlob(parts, rate) {
  const dataBytes = parts.reduce((n, p) => n + p.byteLength, 0);
  const header = new DataView(new ArrayBuffer(44));
  const str = (o, s) => [...s].forEach((c, i) => header.setUint8(o + i, c.charCodeAt(0)));
  str(0, "RIFF"); header.setUint32(4, 36 + dataBytes, true); str(8, "WAVE");
  str(12, "fmt "); header.setUint32(16, 16, true); header.setUint16(20, 1, true);
  header.setUint16(22, 1, true); header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true); header.setUint16(32, 2, true); header.setUint16(34, 16, true);
  str(36, "data"); header.setUint32(40, dataBytes, true);
  return new Blob([header, ...parts], { type: "audio/wav" });
}

function resetDownload() {
  const a = $("download");
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = null;
  a.removeAttribute("href");
  a.classList.add("disabled");
  a.setAttribute("aria-disabled", "true");
}

async function speak() {
  const text = $("text").value;
  if (!text.trim()) { status($("status"), "Type some text first.", true); return; }
  if (!audioCtx) audioCtx = new AudioContext();
  await audioCtx.resume();
  resetRun();
  const body = requestBody("pcm");
  const seed = $("seed").value.trim();
  if (seed !== "") body.seed = Number(seed);
  lastBody = body;

  controller = new AbortController();
  setState("streaming");
  status($("status"), "Generating…");
  const t0 = performance.now();
  const parts = [];
  let leftover = null;
  let playAt = 0;
  let rate = RATE_FALLBACK;
  try {
    const resp = await fetch("/v1/audio/speech", {
      method: "POST", body: JSON.stringify(body), signal: controller.signal,
      headers: headers({ "Content-Type": "application/json" }),
    });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    rate = Number(resp.headers.get("x-vocalis-sample-rate")) || RATE_FALLBACK;
    vocalis.seed = resp.headers.get("x-vocalis-seed");
    $("seed-used").textContent = vocalis.seed ?? "–";
    const reader = resp.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let bytes = value;
      if (leftover) {  // a sample split across two network chunks
        bytes = new Uint8Array(leftover.length + value.length);
        bytes.set(leftover); bytes.set(value, leftover.length);
        leftover = null;
      }
      const whole = bytes.length - (bytes.length % 2);
      if (whole < bytes.length) leftover = bytes.slice(whole);
      if (!whole) continue;
      const pcm = new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + whole));
      parts.push(pcm.buffer);
      if (vocalis.ttfaMs === null) {
        vocalis.ttfaMs = performance.now() - t0;
        $("ttfa").textContent = `${Math.round(vocalis.ttfaMs)} ms`;
      }
      const buffer = audioCtx.createBuffer(1, pcm.length, rate);
      const ch = buffer.getChannelData(0);
      for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
      const src = audioCtx.createBufferSource();
      src.buffer = buffer;
      src.connect(audioCtx.destination);
      playAt = Math.max(playAt, audioCtx.currentTime + 0.03);
      src.start(playAt);
      if (vocalis.firstPlayMs === null) vocalis.firstPlayMs = performance.now() - t0;
      playAt += buffer.duration;
      vocalis.samples += pcm.length;
      vocalis.chunksScheduled += 1;
      $("duration").textContent = `${(vocalis.samples / rate).toFixed(2)} s`;
    }
    vocalis.wallMs = performance.now() - t0;
    const wallS = vocalis.wallMs / 1000;
    vocalis.xRealTime = vocalis.samples / rate / wallS;
    $("xrt").textContent = `${vocalis.xRealTime.toFixed(1)}× real time`;
    const a = $("download");
    downloadUrl = URL.createObjectURL(wavBlob(parts, rate));
    a.href = downloadUrl;
    a.classList.remove("disabled");
    a.removeAttribute("aria-disabled");
    status($("status"), `Done: ${(vocalis.samples / rate).toFixed(2)} s of audio in ${wallS.toFixed(2)} s.`);
    setState("done");
  } catch (err) {
    if (err.name === "AbortError") {
      status($("status"), "Stopped.");
      setState("idle");
    } else {
      vocalis.error = String(err.message || err);
      status($("status"), vocalis.error, true);
      setState("error");
    }
  } finally {
    controller = null;
  }
}

async function upload(event) {
  event.preventDefault();
  const name = $("voice-name").value;  // the server refuses surrounding spaces too
  const file = $("voice-file").files[0];
  if (!name || !file) return;
  const form = new FormData();
  form.append("name", name);
  form.append("audio_sample", file, file.name);
  if (models.length > 1 && modelId) form.append("model", modelId);
  const refText = $("ref-text").value.trim();
  if (!$("ref-text-box").hidden && refText) form.append("ref_text", refText);
  $("upload-button").disabled = true;
  status($("upload-status"), "Computing the voice…");
  try {
    const resp = await fetch("/v1/audio/voices", { method: "POST", body: form, headers: headers() });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    const voice = await resp.json();
    await loadVoices(voice.id);
    status($("upload-status"), `Voice "${voice.name}" is ready and selected.`);
    $("upload").reset();
  } catch (err) {
    status($("upload-status"), String(err.message || err), true);
  } finally {
    $("upload-button").disabled = false;
  }
}

$("speak").addEventListener("click", speak);
$("stop").addEventListener("click", () => {
  if (controller) controller.abort();
  if (audioCtx) { audioCtx.close(); audioCtx = null; }  // silence what was already scheduled
});
$("upload").addEventListener("submit", upload);
$("download").addEventListener("click", download);
$("model-select").addEventListener("change", () => {
  const chosen = models.find((m) => m.id === $("model-select").value);
  if (chosen) applyModel(chosen);
  loadVoices();
});
$("api-key").value = localStorage.getItem("vocalis-api-key") || "";
$("api-key").addEventListener("change", () => {
  localStorage.setItem("vocalis-api-key", $("api-key").value.trim());
  loadInfo().then(() => loadVoices());
});
loadInfo().then(() => loadVoices());
