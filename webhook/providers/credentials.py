"""Credentials for intensity providers: read from env or files, never printed.

A :class:`Secret` holds one credential. Its ``repr``/``str`` never show the value, so a
secret that ends up in a log line, an exception or a dataclass repr by mistake prints
as ``Secret('***')``. Code that must send it calls :meth:`Secret.reveal` at the edge.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook.config import ConfigError


class Secret:
    """An opaque credential. Compare with ``==``; send with :meth:`reveal`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The raw value, for the one place that puts it on the wire."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _read_file(path: str, key: str) -> str:
    try:
        text = Path(path).read_text("utf-8").strip()
    except OSError as exc:
        raise ConfigError(key, f"cannot read the credential file {path}: {exc.strerror}") from None
    if not text:
        raise ConfigError(key, f"the credential file {path} is empty")
    return text


def resolve_secret(
    options: Mapping[str, Any],
    *,
    provider: str,
    option: str,
    env: str,
    env_map: Mapping[str, str] | None = None,
    literal_ok: bool = False,
) -> Secret | None:
    """Find one credential; the first source that is set wins.

    Order: option ``<option>_file`` (a mounted Secret), env ``<env>_FILE``, env ``<env>``.
    A literal value in the YAML file is refused unless ``literal_ok`` (for a user name):
    config files end up in ConfigMaps and version control. Returns None when no source
    is set.
    """
    environ = os.environ if env_map is None else env_map
    if option in options and literal_ok:
        value = options[option]
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{provider}.{option}", "must be a non-empty string")
        return Secret(value)
    if option in options:
        raise ConfigError(
            f"{provider}.{option}",
            f"do not put credentials in the config file; use {option}_file "
            f"(a mounted Secret) or the environment variable {env}",
        )
    file_key = f"{option}_file"
    if file_key in options:
        path = options[file_key]
        if not isinstance(path, str) or not path:
            raise ConfigError(f"{provider}.{file_key}", "must be a file path")
        return Secret(_read_file(path, f"{provider}.{file_key}"))
    if environ.get(f"{env}_FILE"):
        return Secret(_read_file(environ[f"{env}_FILE"], f"{env}_FILE"))
    if environ.get(env):
        return Secret(environ[env].strip())
    return None
