"""Build the configured provider chain."""

from __future__ import annotations

from webhook.config import Config, ConfigError
from webhook.providers.base import Provider
from webhook.providers.static import StaticProvider


def build_providers(config: Config) -> list[Provider]:
    """One provider per name in ``config.providers``, in order."""
    chain: list[Provider] = []
    for i, name in enumerate(config.providers):
        if name == "static":
            chain.append(StaticProvider())
        else:
            raise ConfigError(f"providers[{i}]", f"provider {name!r} is not available")
    return chain
