"""Provider options: each provider's YAML section is a msgspec struct.

A provider declares its section as a struct (unknown keys forbidden, limits as
``msgspec.Meta``) and reads it with :func:`parse`, which raises
:class:`webhook.model.validation.InvalidInput` naming ``<provider>.<key>``. A field's
``Meta(description=...)`` is added to any error about that field, so the message says
what to write instead. What a struct cannot express lives here too: the base URL check
(with its environment fallback). Credentials are read by :mod:`.credentials`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

import msgspec
import msgspec.inspect

from webhook.model.validation import InvalidInput, convert

S = TypeVar("S", bound=msgspec.Struct)

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
"""A string option that may not be empty."""


class NoOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The section of a provider that takes no options."""


class NetworkOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Keys every network provider accepts: its base URL and overrides of the
    ``feed`` defaults for its own requests."""

    url: NonEmpty | None = None
    timeout_seconds: (
        Annotated[float, msgspec.Meta(ge=0.05, description="seconds, e.g. 5")] | None
    ) = None
    retries: Annotated[int, msgspec.Meta(ge=0, description="a whole number, e.g. 2")] | None = None


def parse(section: Mapping[str, Any] | None, schema: type[S], provider: str) -> S:
    """``section`` (None: absent) validated against ``schema``; errors name
    ``<provider>.<key>`` and, where the schema says so, what to write instead."""
    try:
        return convert({} if section is None else section, schema, prefix=provider)
    except InvalidInput as exc:
        raise _explained(exc, schema, provider) from None


def _explained(exc: InvalidInput, schema: type[msgspec.Struct], provider: str) -> InvalidInput:
    fields = schema.__struct_fields__
    if exc.message == "unknown field":
        if not fields:
            return InvalidInput(exc.path, f"{provider} takes no options")
        return InvalidInput(exc.path, f"unknown key (known: {', '.join(sorted(fields))})")
    key = exc.path.removeprefix(f"{provider}.").split(".")[0].split("[")[0]
    hint = _descriptions(schema).get(key)
    return InvalidInput(exc.path, f"{exc.message}; {hint}") if hint else exc


def _descriptions(schema: type[msgspec.Struct]) -> dict[str, str]:
    """Field name -> its ``Meta(description=...)``, looking inside ``X | None``."""
    found: dict[str, str] = {}
    info = msgspec.inspect.type_info(schema)
    assert isinstance(info, msgspec.inspect.StructType)
    for field in info.fields:
        kinds = field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else ()
        for kind in (field.type, *kinds):
            if isinstance(kind, msgspec.inspect.Metadata) and kind.extra_json_schema:
                description = kind.extra_json_schema.get("description")
                if isinstance(description, str):
                    found[field.name] = description
    return found


def base_url(
    value: str | None, *, provider: str, env: Mapping[str, str], env_name: str, default: str
) -> str:
    """A base URL: option ``url``, else env ``env_name``, else ``default``.

    Must be http(s) with a host and must not embed credentials (they would leak
    into logs and error messages).
    """
    where = f"{provider}.url"
    if value is None and env.get(env_name):
        value, where = env[env_name], env_name
    if value is None:
        value = default
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        valid = False
    if not valid:
        raise InvalidInput(where, f"must be an http(s) URL such as {default}")
    if parts.username or parts.password:
        raise InvalidInput(where, "must not contain credentials; use the token settings")
    return value.rstrip("/")
