"""Qwen3-TTS speaker encoder (Base checkpoints): 24 kHz waveform -> x-vector.

ECAPA-TDNN (Desplanques et al. 2020, arXiv:2005.07143) over a log-mel spectrogram, as
``Qwen3TTSSpeakerEncoder`` and ``mel_spectrogram`` of ``qwen-tts`` 0.1.1
``qwen_tts/core/models/modeling_qwen3_tts.py`` (cited ``Q:line``), called as
``Qwen3TTSForConditionalGeneration.extract_speaker_embedding`` does (Q:1940-1954): 128 mels,
n_fft 1024, hop 256, Hann window 1024, 0..12 kHz. Tensor names are those under the
``speaker_encoder.`` prefix of a Base checkpoint's ``model.safetensors``.

The mel filterbank is computed here from the Slaney formulas that ``librosa.filters.mel``
(0.11, ``norm="slaney"``, ``htk=False``, float32) implements, including its float32 storage
before the area normalisation, so that it equals librosa's array bit for bit without librosa.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from vocalis.errors import InputError

SAMPLE_RATE = 24000
N_FFT, HOP, WIN, N_MELS, FMIN, FMAX = 1024, 256, 1024, 128, 0.0, 12000.0  # Q:1943-1951


_F_SP = 200.0 / 3  # Hz per mel below 1 kHz
_MIN_LOG_MEL = 1000.0 / _F_SP  # the mel of 1 kHz, computed as librosa does (not 15.0 exactly)
_LOGSTEP = np.log(6.4) / 27.0


def _hz_to_mel(f) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz, logarithmic above (librosa ``hz_to_mel``)."""
    f = np.asarray(f, dtype=np.float64)
    log = _MIN_LOG_MEL + np.log(np.maximum(f, 1000.0) / 1000.0) / _LOGSTEP
    return np.where(f >= 1000.0, log, f / _F_SP)


def _mel_to_hz(m) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    log = 1000.0 * np.exp(_LOGSTEP * (np.maximum(m, _MIN_LOG_MEL) - _MIN_LOG_MEL))
    return np.where(m >= _MIN_LOG_MEL, log, _F_SP * m)


def slaney_mel_filterbank(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS,
                          fmin: float = FMIN, fmax: float = FMAX) -> np.ndarray:
    """Triangular mel filters with Slaney area normalisation, float32 ``[n_mels, n_fft//2+1]``.

    Band edges: ``n_mels + 2`` points evenly spaced on the Slaney mel scale between fmin and
    fmax; filter i rises from edge i to edge i+1 and falls to edge i+2; each filter is then
    scaled by ``2 / (edge[i+2] - edge[i])`` (Hz). Same op order and float32 rounding points as
    ``librosa.filters.mel``.
    """
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(edges)
    ramps = np.subtract.outer(edges, fftfreqs)
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2:n_mels + 2] - edges[:n_mels]))[:, None]
    return weights


_FILTERS: dict = {}


def mel_spectrogram(wav: torch.Tensor) -> torch.Tensor:
    """Log-mel spectrogram of the speaker encoder (Q:399-464 with the arguments of Q:1943-1951).

    ``wav``: float ``[B, L]`` at 24 kHz, L > 384. Reflect-pad 384 on both sides, STFT
    (center=False, Hann 1024, hop 256), magnitude ``sqrt(re^2 + im^2 + 1e-9)``, mel
    filterbank, ``log(clamp(x, 1e-5))``. Returns float32 ``[B, 128, L // 256]``.

    Raises:
        InputError: audio of 384 samples or fewer (16 ms).
    """
    pad = (N_FFT - HOP) // 2
    if wav.dim() != 2 or wav.shape[-1] <= pad:
        raise InputError(f"the speaker encoder needs [batch, samples] audio of more than {pad} "
                         f"samples at 24 kHz, got shape {tuple(wav.shape)}")
    key = wav.device
    if key not in _FILTERS:
        _FILTERS[key] = (torch.from_numpy(slaney_mel_filterbank()).float().to(wav.device),
                         torch.hann_window(WIN).to(wav.device))
    basis, window = _FILTERS[key]
    y = F.pad(wav.float().unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    spec = torch.stft(y, N_FFT, hop_length=HOP, win_length=WIN, window=window, center=False,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    spec = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    return torch.log(torch.clamp(torch.matmul(basis, spec), min=1e-5))


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """``speaker_encoder_config`` of a Base checkpoint's ``config.json`` (official defaults,
    ``configuration_qwen3_tts.py:47-58``); released checkpoints set only ``enc_dim`` (the
    talker width) and ``sample_rate``."""

    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = 24000

    @classmethod
    def from_dict(cls, d: dict) -> "SpeakerEncoderConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()
                      if k in known})


def _conv(c_in: int, c_out: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(c_in, c_out, kernel, dilation=dilation, padding="same",
                     padding_mode="reflect")


class TDNN(nn.Module):
    """Conv1d ('same', reflect padding) + ReLU (Q:247-267)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int):
        super().__init__()
        self.conv = _conv(c_in, c_out, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class Res2Net(nn.Module):
    """Split into ``scale`` chunks; chunk 0 passes, chunk 1 -> tdnn_0, chunk i -> tdnn_{i-1}
    (chunk_i + out_{i-1}) (Q:95-126)."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        self.scale = scale
        w = channels // scale
        self.blocks = nn.ModuleList(TDNN(w, w, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = []
        for i, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 1:
                part = self.blocks[0](part)
            elif i > 1:
                part = self.blocks[i - 1](part + outs[-1])
            outs.append(part)
        return torch.cat(outs, dim=1)


class SqueezeExcitation(nn.Module):
    """``x * sigmoid(conv2(relu(conv1(mean_t(x)))))`` (Q:129-156)."""

    def __init__(self, channels: int, se: int):
        super().__init__()
        self.conv1 = _conv(channels, se, 1)
        self.conv2 = _conv(se, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * s


class SERes2NetBlock(nn.Module):
    """TDNN(k1) -> Res2Net -> TDNN(k1) -> SE, plus the input (Q:269-308)."""

    def __init__(self, c_in: int, c_out: int, scale: int, se: int, kernel: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNN(c_in, c_out, 1, 1)
        self.res2net_block = Res2Net(c_out, scale, kernel, dilation)
        self.tdnn2 = TDNN(c_out, c_out, 1, 1)
        self.se_block = SqueezeExcitation(c_out, se)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x)))) + x


def _stats(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean and ``sqrt(clamp(var, 1e-12))`` over time (Q:211-214)."""
    mean = (w * x).sum(2)
    std = torch.sqrt((w * (x - mean.unsqueeze(2)).pow(2)).sum(2).clamp(1e-12))
    return mean, std


class AttentiveStatsPool(nn.Module):
    """Channel-wise attentive mean and std, global context appended (Q:159-244)."""

    def __init__(self, channels: int, attention: int):
        super().__init__()
        self.tdnn = TDNN(channels * 3, attention, 1, 1)
        self.conv = _conv(attention, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, T] -> [B, 2C, 1]``."""
        t = x.shape[-1]
        ones = torch.ones(x.shape[0], 1, t, dtype=x.dtype, device=x.device)
        mean, std = _stats(x, ones / ones.sum(dim=2, keepdim=True))
        ctx = torch.cat([x, mean.unsqueeze(2).repeat(1, 1, t), std.unsqueeze(2).repeat(1, 1, t)], 1)
        att = F.softmax(self.conv(torch.tanh(self.tdnn(ctx))), dim=2)
        mean, std = _stats(x, att)
        return torch.cat((mean, std), dim=1).unsqueeze(2)


class SpeakerEncoder(nn.Module):
    """ECAPA-TDNN: log-mel ``[B, T, 128]`` -> x-vector ``[B, enc_dim]`` (Q:311-393)."""

    def __init__(self, c: SpeakerEncoderConfig):
        super().__init__()
        ch, ks, dl = c.enc_channels, c.enc_kernel_sizes, c.enc_dilations
        if not len(ch) == len(ks) == len(dl):
            raise ValueError("enc_channels, enc_kernel_sizes and enc_dilations differ in length")
        self.config = c
        self.blocks = nn.ModuleList([TDNN(c.mel_dim, ch[0], ks[0], dl[0])] + [
            SERes2NetBlock(ch[i - 1], ch[i], c.enc_res2net_scale, c.enc_se_channels, ks[i], dl[i])
            for i in range(1, len(ch) - 1)])
        self.mfa = TDNN(ch[-1], ch[-1], ks[-1], dl[-1])
        self.asp = AttentiveStatsPool(ch[-1], c.enc_attention_channels)
        self.fc = _conv(ch[-1] * 2, c.enc_dim, 1)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        x = mels.transpose(1, 2)
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs[1:], dim=1))
        return self.fc(self.asp(x)).squeeze(-1)

    @torch.no_grad()
    def embed(self, wav: torch.Tensor) -> torch.Tensor:
        """x-vector of one 24 kHz mono waveform ``[L]`` -> ``[enc_dim]`` (float32 mel, cast to
        the encoder's dtype, as Q:1940-1954). Resampling is the caller's job.

        Raises:
            InputError: not 1-D, or 384 samples or fewer.
        """
        if wav.dim() != 1:
            raise InputError(f"speaker audio must be one mono waveform [samples], got "
                             f"shape {tuple(wav.shape)}")
        p = next(self.parameters())
        mels = mel_spectrogram(wav.float().cpu()[None]).transpose(1, 2)
        return self(mels.to(p.device, p.dtype))[0]
