"""Where an API server serves a kind: one value type for its API coordinates."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """A resource's group, version, plural name and kind (``group`` empty: the core API)."""

    group: str
    version: str
    plural: str
    kind: str = ""

    @property
    def api_version(self) -> str:
        """``group/version`` (``version`` alone in the core API)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """``plural.group``, as RBAC, logs and metrics name it (``plural`` in the core API)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return self.name
