"""Validation of one provider's YAML section (``Config.provider_options[name]``).

Each provider declares the keys it accepts; a wrong key or value raises
:class:`webhook.config.ConfigError` naming ``<provider>.<key>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from webhook.config import ConfigError


class Options:
    """A provider's section with typed accessors that name the offending key."""

    def __init__(
        self,
        provider: str,
        section: Mapping[str, Any] | None,
        allowed: Sequence[str],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.provider = provider
        self.section: Mapping[str, Any] = section or {}
        self.env: Mapping[str, str] = os.environ if env is None else env
        for key in self.section:
            if key not in allowed:
                raise ConfigError(
                    f"{provider}.{key}", f"unknown key (known: {', '.join(sorted(allowed))})"
                )

    def key(self, name: str) -> str:
        """Dotted config key for messages."""
        return f"{self.provider}.{name}"

    def string(self, name: str, default: str | None = None) -> str | None:
        """A non-empty string option, or ``default``."""
        value = self.section.get(name, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise ConfigError(self.key(name), f"must be a non-empty string, got {value!r}")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        """One of ``choices``."""
        value = self.section.get(name, default)
        if value not in choices:
            raise ConfigError(self.key(name), f"must be one of {', '.join(choices)}, got {value!r}")
        return str(value)

    def number(self, name: str, default: float | None, *, minimum: float = 0.0) -> float | None:
        """A number >= ``minimum``, or ``default``."""
        value = self.section.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise ConfigError(self.key(name), f"must be a number >= {minimum:g}, got {value!r}")
        return float(value)

    def integer(self, name: str, default: int | None, *, minimum: int = 0) -> int | None:
        """An integer >= ``minimum``, or ``default``."""
        value = self.section.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(self.key(name), f"must be an integer >= {minimum}, got {value!r}")
        return value

    def url(self, name: str, env: str, default: str) -> str:
        """A base URL: option ``name``, else env ``env``, else ``default``.

        Must be http(s) with a host and must not embed credentials (they would leak
        into logs and error messages).
        """
        value = self.section.get(name)
        where = self.key(name)
        if value is None and self.env.get(env):
            value, where = self.env[env], env
        if value is None:
            value = default
        if not isinstance(value, str):
            raise ConfigError(where, f"must be a URL, got {value!r}")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(where, f"must be an http(s) URL such as {default}")
        if parts.username or parts.password:
            raise ConfigError(where, "must not contain credentials; use the token settings")
        return value.rstrip("/")
