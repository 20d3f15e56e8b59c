"""The leader's controllers for Liqo: the accounting of NamespaceOffloadings by their
pods on virtual nodes."""
