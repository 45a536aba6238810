"""``vocalis serve``: an OpenAI-compatible streaming speech server with a web page.

:func:`create_app` builds the FastAPI app for a loaded model; :func:`run` loads the model
and serves it with uvicorn until SIGINT/SIGTERM (in-flight streams get
``shutdown_timeout`` seconds to finish, then they are cancelled).
"""

from vocalis.server.app import create_app
from vocalis.server.run import run

__all__ = ["create_app", "run"]
