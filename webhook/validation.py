"""One way to validate input: msgspec types in, one error type out.

Config files, scenario files, provider options, AdmissionReview envelopes and scheduler
requests are all described by msgspec structs and decoded (bytes) or converted (YAML
already parsed into Python objects) through this module. Whatever is wrong raises
:class:`InvalidInput`, whose ``path`` names the offending field the way a person would
write it (``feed.retries``, ``clusters[0].name``), and every HTTP endpoint answers it with
status 400 and the body ``{"error": "<path>: <message>"}`` (:func:`error_body`).
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec
import orjson

T = TypeVar("T")

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")
_AT = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


class InvalidInput(ValueError):
    """Input that does not fit its schema. ``path`` is the field (empty: the whole input)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)

    def within(self, prefix: str) -> InvalidInput:
        """The same error with its path under ``prefix`` (e.g. a provider's section)."""
        return InvalidInput(join(prefix, self.path), self.message)


def join(prefix: str, path: str) -> str:
    """``prefix`` and ``path`` as one dotted path (list indexes stay ``[i]``)."""
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def from_msgspec(
    exc: msgspec.ValidationError | msgspec.DecodeError, prefix: str = ""
) -> InvalidInput:
    """Translate msgspec's ``"<message> - at `$.a.b[0]`"`` into :class:`InvalidInput`."""
    text = str(exc)
    match = _AT.match(text)
    message, path = (match["message"], match["path"] or "") if match else (text, "")
    path = path.removeprefix(".")
    unknown = _UNKNOWN.match(message)
    if unknown:  # name the field itself: ``feed.x: unknown field``
        path, message = join(path, unknown["field"]), "unknown field"
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        message = f"not valid JSON: {message}"
    return InvalidInput(join(prefix, path), _plain(message))


def _plain(message: str) -> str:
    """msgspec's messages with the backticks dropped (``Expected `int` `` reads odd in YAML
    contexts) and a lower-case start, so ``<path>: <message>`` reads as one sentence."""
    text = message.replace("`", "")
    return text[:1].lower() + text[1:]


def convert(data: object, kind: type[T], prefix: str = "") -> T:
    """Validate already-parsed data (e.g. from YAML) against ``kind``."""
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise from_msgspec(exc, prefix) from None


def decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    """A reusable JSON decoder for ``kind`` (build once per type, at import)."""
    return msgspec.json.Decoder(kind)


def decode(raw: bytes, using: msgspec.json.Decoder[T]) -> T:
    """Decode and validate a JSON body with a decoder from :func:`decoder`."""
    try:
        return using.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise from_msgspec(exc) from None


def error_body(exc: InvalidInput | str) -> bytes:
    """The JSON error body every HTTP endpoint sends: ``{"error": "..."}``."""
    return orjson.dumps({"error": str(exc)})


def check(condition: bool, path: str, message: str) -> None:
    """Raise :class:`InvalidInput` at ``path`` unless ``condition`` holds (cross-field rules)."""
    if not condition:
        raise InvalidInput(path, message)
