"""Karmada: the placement a (Cluster)PropagationPolicy gets (the ordered fill, weights,
tiers), Karmada's own rules the decisions follow (division, tier fill, room, the placement
view), the move back to greener tiers and the carried non-workloads."""
