"""Every provider carbonshift knows: one row each, and the chain built from them.

:data:`PROVIDERS` maps a provider's config name to its :class:`ProviderRow`: what the
configuration knows of it (:mod:`webhook.model.catalog`: the struct describing its
YAML section, its credentials) and the factory that builds it from that section.
:func:`build_providers` walks it. Adding a provider is one module, one entry in the
catalog, one factory here and its tests.

Nothing here imports :mod:`webhook.model.config` at run time; the configuration reads the
catalog alone, never this module (so it stays free of HTTP clients and metrics).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from webhook.model.catalog import CATALOG, Entry
from webhook.model.validation import InvalidInput
from webhook.providers import electricitymaps, static, trace, ukgrid, watttime
from webhook.providers.base import Provider
from webhook.providers.http import HttpSettings

if TYPE_CHECKING:
    from webhook.model.config import Config, FeedConfig

Factory = Callable[[Mapping[str, Any] | None, HttpSettings, Mapping[str, str]], Provider]
"""Builds a provider from its config section (None: absent), the HTTP settings from
the ``feed`` section and the environment (credentials, URL overrides); raises
:class:`InvalidInput` naming ``<provider>.<key>``."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderRow:
    """One provider: what the configuration knows of it, and its factory."""

    entry: Entry
    factory: Factory

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def summary(self) -> str:
        return self.entry.summary

    def check(self, section: Mapping[str, Any] | None) -> None:
        """Validate the section's shape (:meth:`Entry.check`)."""
        self.entry.check(section)


_FACTORIES: Mapping[str, Factory] = {
    electricitymaps.NAME: electricitymaps.ElectricityMapsProvider.from_options,
    watttime.NAME: watttime.WattTimeProvider.from_options,
    ukgrid.NAME: ukgrid.UKGridProvider.from_options,
    static.NAME: static.StaticProvider.from_options,
    trace.NAME: trace.TraceProvider.from_options,
}
PROVIDERS: Mapping[str, ProviderRow] = MappingProxyType(
    {name: ProviderRow(entry, _FACTORIES[name]) for name, entry in CATALOG.items()}
)
"""Provider name -> row, in the usual chain order."""


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
    raises :class:`InvalidInput` naming ``<provider>.<key>``, an unknown name
    ``providers[i]``.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    settings = http_settings(config.feed)
    chain: list[Provider] = []
    for i, name in enumerate(config.providers):
        row = PROVIDERS.get(name)
        if row is None:
            known = ", ".join(PROVIDERS)
            raise InvalidInput(f"providers[{i}]", f"unknown provider {name!r} (known: {known})")
        chain.append(row.factory(config.provider_options.get(name), settings, environ))
    return chain
