"""Liqo: the remote clusters behind virtual nodes (peers) and the NamespaceOffloading
cluster selector."""
