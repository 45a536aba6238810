"""OpenAI's error envelope for every error the server answers.

``{"error": {"message": str, "type": str, "param": str | None, "code": str | None}}``

Types follow OpenAI: ``invalid_request_error`` for 4xx (401 included, with code
``invalid_api_key``), ``rate_limit_error`` for 429 (with ``Retry-After``), ``server_error``
for 5xx. FastAPI's own 422 ``{"detail": [...]}`` never leaves the server: request
validation errors become 400 envelopes naming the offending field in ``param``.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import WebSocketRoute

from vocalis.errors import VocalisError

log = logging.getLogger("vocalis.server")

RETRY_AFTER_S = 1


class APIError(Exception):
    """An error answered as an OpenAI envelope with ``status``."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, type: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or error_type(status)
        self.headers = headers or {}


def error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def envelope(status: int, message: str, *, param: str | None = None, code: str | None = None,
             type: str | None = None) -> dict:
    return {"error": {"message": message, "type": type or error_type(status), "param": param,
                      "code": code}}


def error_response(status: int, message: str, *, param: str | None = None,
                   code: str | None = None, type: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    if status == 429:
        headers.setdefault("Retry-After", str(RETRY_AFTER_S))
        headers.setdefault("retry-after-ms", str(RETRY_AFTER_S * 1000))
    return JSONResponse(envelope(status, message, param=param, code=code, type=type),
                        status_code=status, headers=headers)


def from_exception(exc: BaseException, param: str | None = None) -> APIError:
    """Any exception -> APIError (VocalisError keeps its status and code; others are 500)."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, VocalisError):
        return APIError(exc.http_status, str(exc) or type(exc).__name__,
                        param=param or getattr(exc, "param", None), code=exc.code)
    return APIError(500, f"internal error ({type(exc).__name__}); see the server log",
                    code="internal_error")


_PYDANTIC_CODES = {
    "string_too_long": "string_above_max_length",
    "missing": "missing_required_parameter",
    "extra_forbidden": "unknown_parameter",
    "json_invalid": "invalid_json",
    "model_attributes_type": "invalid_request_body",
    "model_type": "invalid_request_body",
    "dict_type": "invalid_request_body",
}


def _validation_error(exc: RequestValidationError, content_type: str | None = "",
                      takes: str | None = None) -> APIError:
    """The 400 for a request the schema refused. ``content_type``: the request's
    Content-Type header (None: none; ``""``: not an HTTP request body, e.g. a WebSocket
    message): a body FastAPI did not read as JSON because of it is named so. ``takes``:
    what the message takes, named in the refusal of an unknown field (a WebSocket message,
    which ``/openapi.json`` does not describe); None: the HTTP schema there."""
    errors = exc.errors()
    if not errors:
        return APIError(400, "invalid request", code="invalid_request")
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    kind = first.get("type", "invalid")
    if content_type != "" and not loc and kind in _BODY_TYPE_ERRORS \
            and isinstance(getattr(exc, "body", None), (bytes, bytearray)):
        # FastAPI reads a body as JSON only with Content-Type application/json (or +json):
        # any other (text/plain, a form, none) leaves it bytes, which no schema takes
        got = (f"is {_shown_header(content_type)}" if content_type
               else "header is missing")
        return APIError(400, f"the request's Content-Type {got}, not application/json: send "
                             "the JSON body with the header Content-Type: application/json "
                             "(curl: -H 'Content-Type: application/json')",
                        code=_PYDANTIC_CODES[kind])
    if kind == "json_invalid":
        ctx = first.get("ctx") or {}
        detail = ctx.get("error") or first.get("msg", "")
        return APIError(400, f"request body is not valid JSON ({detail}): send a JSON object "
                             "with Content-Type: application/json", code="invalid_json")
    # A union (voice: str | {"id": ...}) reports one error per branch: name the field once.
    param = ".".join(p for p in loc if p not in _UNION_TAGS and "[" not in p) or None
    if kind == "extra_forbidden":
        msg = (f"unknown parameter {param!r}: see the request schema at /openapi.json"
               if takes is None else f"unknown parameter {param!r}: {takes}")
    elif kind == "missing" and param is None:
        return APIError(400, "request body is missing: send a JSON object with Content-Type: "
                             'application/json, e.g. {"model": "tts-1", "input": "Hello.", '
                             '"voice": "alloy"}', code="missing_body")
    elif kind == "missing":
        msg = f"missing required parameter {param!r}"
        body = getattr(exc, "body", None)
        near = difflib.get_close_matches(param, [k for k in body if isinstance(k, str)], n=1,
                                         cutoff=0.6) if isinstance(body, dict) else []
        if near:  # {"vocie": "alba"}: the field is there, misspelled
            msg += f" (the request has {near[0]!r}: did you mean {param!r}?)"
    elif param:
        msg = first.get("msg", "invalid value")
        if not msg.startswith(f"{param} "):  # ours name the field already
            msg = f"{param}: {msg}"
        if "input" in first and kind not in ("string_too_long",):
            shown = json.dumps(first["input"], default=str)
            if len(shown) <= 80:
                msg += f" (got {shown})"
    else:
        msg = first.get("msg", "invalid request")
        if kind in _BODY_TYPE_ERRORS:
            msg = "request body must be a JSON object"
    if len(errors) > 1 and not all(e.get("loc", ())[:2] == first.get("loc", ())[:2]
                                   for e in errors):
        msg += f" (also: {_others(errors[1:], first)})"
    return APIError(400, msg, param=param, code=_PYDANTIC_CODES.get(kind, kind))


def _others(errors: list, first: dict) -> str:
    """The other problems of a request, one short phrase each (``'input' missing``,
    ``'speed' invalid``), each field once, the first error's field left out."""
    seen = {tuple(first.get("loc", ())[:2])}
    out = []
    for e in errors:
        loc = tuple(e.get("loc", ())[:2])
        if loc in seen:
            continue
        seen.add(loc)
        name = ".".join(str(p) for p in e.get("loc", ())
                        if p not in ("body", "query", "path", "header")
                        and p not in _UNION_TAGS and "[" not in str(p)) or "the body"
        what = {"missing": "missing", "extra_forbidden": "unknown"}.get(e.get("type"), "invalid")
        out.append(f"{name!r} {what}")
    return ", ".join(out)


_BODY_TYPE_ERRORS = ("model_type", "model_attributes_type", "dict_type")


def close_reason(message: str) -> str:
    """``message`` cut to a WebSocket close reason (at most 123 bytes of UTF-8), so that
    a close carries what went wrong, not only its code."""
    data = message.encode("utf-8", "replace")
    return message if len(data) <= 123 else data[:120].decode("utf-8", "ignore") + "..."


def _shown_header(value: str, limit: int = 60) -> str:
    """A header value for a message: quoted and escaped, cut to ``limit`` characters."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}..."


#: FastAPI's detail when decoding or parsing the body raised something other than a
#: JSONDecodeError (UnicodeDecodeError, RecursionError)
_FASTAPI_PARSE_ERROR = "There was an error parsing the body"

_UNION_TAGS = {"str", "int", "float", "bool", "VoiceRef"}

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large",
               401: "invalid_api_key", 503: "unavailable"}


#: the name of the server's catch-all WebSocket route (a 404 for paths without one)
NO_WEBSOCKET_ROUTE = "no_websocket_route"


def _websocket_route(request: Request) -> bool:
    """Whether the request's path is one of the app's WebSocket routes (the catch-all
    aside)."""
    path = request.url.path
    return any(isinstance(r, WebSocketRoute) and r.name != NO_WEBSOCKET_ROUTE
               and r.path_regex.match(path) for r in request.app.routes)


def install(app: FastAPI, redact: Callable[[str], str] = str) -> None:
    """Register the handlers that turn every error into an envelope; ``redact`` rewrites
    each message before it leaves (the server hides its folders with it)."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        return error_response(exc.status, redact(exc.message), param=exc.param, code=exc.code,
                              type=exc.type, headers=exc.headers)

    @app.exception_handler(VocalisError)
    async def _vocalis_error(request: Request, exc: VocalisError):
        e = from_exception(exc)
        return error_response(e.status, redact(e.message), param=e.param, code=e.code)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        e = _validation_error(exc, request.headers.get("content-type"))
        return error_response(e.status, redact(e.message), param=e.param, code=e.code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        if status == 404 and _websocket_route(request):
            message = (f"{request.url.path} is a WebSocket route: connect to it with a "
                       "WebSocket client (ws:// or wss://), not with " + request.method)
        elif status == 404:
            message = f"no route {request.method} {request.url.path}: see /openapi.json for the API"
        elif status == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        elif status == 400 and exc.detail == _FASTAPI_PARSE_ERROR:
            # json.loads failed beyond a JSON syntax error: bytes that are not UTF-8, or
            # nesting deeper than the parser's recursion limit
            return error_response(400, "request body could not be read as JSON: send UTF-8 "
                                       "text holding a JSON object (not nested thousands deep)",
                                  code="invalid_json")
        else:
            message = str(exc.detail)
        return error_response(status, redact(message), code=_HTTP_CODES.get(status),
                              headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception):
        log.error("unhandled error on %s %r", request.method, request.url.path, exc_info=exc)
        return error_response(500, f"internal error ({type(exc).__name__}); see the server log",
                              code="internal_error")
