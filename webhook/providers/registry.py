"""Build the configured provider chain."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.config import Config, ConfigError, FeedConfig
from webhook.providers.base import Provider
from webhook.providers.electricitymaps import ElectricityMapsProvider
from webhook.providers.http import HttpSettings
from webhook.providers.static import StaticProvider
from webhook.providers.trace import TraceProvider
from webhook.providers.ukgrid import UKGridProvider
from webhook.providers.watttime import WattTimeProvider


def http_settings(feed: FeedConfig) -> HttpSettings:
    """The resilience settings every network provider starts from."""
    return HttpSettings(
        timeout_seconds=feed.timeout_seconds,
        retries=feed.retries,
        backoff_seconds=feed.backoff_seconds,
        breaker_failures=feed.breaker_failures,
        breaker_reset_seconds=feed.breaker_reset_seconds,
    )


def build_providers(config: Config, env: Mapping[str, str] | None = None) -> list[Provider]:
    """One provider per name in ``config.providers``, in order.

    Each provider validates its own config section (``config.provider_options``) and
    reads credentials from ``env`` (default: the process environment); a problem
    raises :class:`ConfigError` naming ``<provider>.<key>``.
    """
    settings = http_settings(config.feed)
    chain: list[Provider] = []
    for i, name in enumerate(config.providers):
        section = config.provider_options.get(name)
        if name == "static":
            if section:
                raise ConfigError(f"{name}.{next(iter(section))}", "static takes no options")
            chain.append(StaticProvider())
        elif name == "electricitymaps":
            chain.append(ElectricityMapsProvider.from_options(section, settings, env))
        elif name == "watttime":
            chain.append(WattTimeProvider.from_options(section, settings, env))
        elif name == "ukgrid":
            chain.append(UKGridProvider.from_options(section, settings, env))
        elif name == "trace":
            chain.append(TraceProvider.from_options(section, env))
        else:
            raise ConfigError(f"providers[{i}]", f"provider {name!r} is not available")
    return chain
