"""Scripts run with the voice-agent frameworks' own interpreter (``VOCALIS_AGENTS_PYTHON``,
built by ``scripts/agent_plugins_venv.sh``): their packages cannot share vocalis's
environment, so tests drive them in a subprocess."""
