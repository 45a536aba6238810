#!/usr/bin/env bash
# Build a virtual environment with LiveKit Agents' ElevenLabs plugin, pinned, for the tests
# that point it, unchanged, at a vocalis server (tests/server/test_agent_plugins.py drives it in
# a subprocess: livekit-agents brings its own dependency pins, which vocalis's environment
# need not share).
#
#   bash scripts/agent_plugins_venv.sh [DIR]        # default DIR: .venv-agents
#   export VOCALIS_AGENTS_PYTHON=$PWD/.venv-agents/bin/python
set -euo pipefail
DIR="${1:-.venv-agents}"
PY="${PYTHON:-python3}"
if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$DIR/bin/python" -m pip install -q livekit-plugins-elevenlabs==1.8.9 livekit-agents==1.8.9
"$DIR/bin/python" -c "import sys; from livekit.plugins import elevenlabs; print('livekit-plugins-elevenlabs ready:', sys.executable)"
