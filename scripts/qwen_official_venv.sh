#!/usr/bin/env bash
# Build a virtual environment with the official Qwen3-TTS package (qwen-tts==0.1.1) for the
# parity tests, which drive it in a subprocess (tests/qwen3/qwen_official/). It cannot share vocalis's
# environment: it pins transformers==4.57.3 (and with it huggingface_hub < 1.0).
#
#   bash scripts/qwen_official_venv.sh [DIR]        # default DIR: .venv-qwen
#   export VOCALIS_QWEN_PYTHON=$PWD/.venv-qwen/bin/python
#
# torch 2.13.0 goes in first; qwen-tts goes in without its dependency list, because that list
# names torchaudio, and no torchaudio release matches torch 2.13 (pip would replace torch by an
# older CUDA build). Its other run-time dependencies are installed pinned or as listed; gradio
# (web demo only) is left out. torchaudio is only imported for the 25 Hz tokenizer, which no
# 12 Hz checkpoint builds: tests/qwen3/qwen_official/_official.py puts a stand-in in its place.
set -euo pipefail
DIR="${1:-.venv-qwen}"
PY="${PYTHON:-python3}"
if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$DIR/bin/python" -m pip install -q torch==2.13.0
"$DIR/bin/python" -m pip install -q --no-deps qwen-tts==0.1.1
"$DIR/bin/python" -m pip install -q transformers==4.57.3 accelerate==1.12.0 librosa soundfile sox onnxruntime einops
"$DIR/bin/python" -c "import sys; sys.path.insert(0, 'tests/qwen3/qwen_official'); import _official; import qwen_tts; print('qwen-tts ready:', sys.executable)"
