"""Every provider carbonshift knows: one row each, and the chain built from them.

:data:`PROVIDERS` maps a provider's config name to its :class:`ProviderRow`: the
factory that builds it from its YAML section and the struct describing that section.
The configuration takes the known names from it (``tuple(PROVIDERS)``) and
:func:`build_providers` walks it. Adding a provider is one module, one row here and its
tests.

Nothing here imports :mod:`webhook.config` at run time: the configuration imports this
module.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec

from webhook.providers import electricitymaps, static, trace, ukgrid, watttime
from webhook.providers.base import Provider
from webhook.providers.credentials import resolve_secret
from webhook.providers.http import HttpSettings
from webhook.providers.options import NetworkOptions, NoOptions, parse
from webhook.validation import InvalidInput

if TYPE_CHECKING:
    from webhook.config import Config, FeedConfig

Factory = Callable[[Mapping[str, Any] | None, HttpSettings, Mapping[str, str]], Provider]
"""Builds a provider from its config section (None: absent), the HTTP settings from
the ``feed`` section and the environment (credentials, URL overrides); raises
:class:`InvalidInput` naming ``<provider>.<key>``."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderRow:
    """One provider: its config name, factory and options schema."""

    name: str
    factory: Factory
    options: type[msgspec.Struct]
    """The struct its YAML section must fit (unknown keys are refused)."""
    summary: str
    """One line for listings: what it is and what it needs."""
    secrets: tuple[tuple[str, str], ...] = ()
    """(credential option, the environment variable to use instead): a literal value in
    the file is refused whether or not the provider is in the chain."""

    def check(self, section: Mapping[str, Any] | None) -> None:
        """Validate the section's shape (no files or environment are read) and refuse
        credentials written into it."""
        parse(section, self.options, self.name)
        for option, env_name in self.secrets:
            resolve_secret(
                key=f"{self.name}.{option}", literal=(section or {}).get(option), file=None,
                env_name=env_name, env={},
            )  # fmt: skip


PROVIDERS: Mapping[str, ProviderRow] = MappingProxyType(
    {
        row.name: row
        for row in (
            ProviderRow(
                electricitymaps.NAME,
                electricitymaps.ElectricityMapsProvider.from_options,
                electricitymaps.Options,
                "Electricity Maps API v3, average intensity; needs an API token",
                (("token", electricitymaps.TOKEN_ENV),),
            ),
            ProviderRow(
                watttime.NAME,
                watttime.WattTimeProvider.from_options,
                watttime.Options,
                "WattTime API v3, marginal intensity (MOER); needs an account",
                (("password", watttime.PASSWORD_ENV),),
            ),
            ProviderRow(
                ukgrid.NAME,
                ukgrid.UKGridProvider.from_options,
                NetworkOptions,
                "UK Carbon Intensity API, Great Britain national and regional; no key",
            ),
            ProviderRow(
                static.NAME,
                static.StaticProvider.from_options,
                NoOptions,
                "embedded annual averages; no key, no network",
            ),
            ProviderRow(
                trace.NAME,
                trace.TraceProvider.from_options,
                trace.Options,
                "replay of Electricity Maps hourly CSV exports; no network",
            ),
        )
    }
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
