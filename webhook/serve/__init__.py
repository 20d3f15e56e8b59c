"""The HTTPS server: admission, the scheduler API, probes and metrics, TLS and its guard."""
