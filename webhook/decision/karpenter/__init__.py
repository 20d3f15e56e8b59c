"""Karpenter: the NodePool decisions (weights, the pause and the ladder over time, the
arm64 preference) and the carbon price NodeOverlays."""
