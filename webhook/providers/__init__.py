"""Carbon-intensity providers: the edge that talks to data sources.

Every provider implements :class:`webhook.providers.base.Provider`. The feed
(:mod:`webhook.feed`) tries them in the configured order and keeps the answers in
memory; nothing on the admission path calls a provider directly.
"""
