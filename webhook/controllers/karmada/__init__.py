"""The leader's controllers for Karmada: the rebalancer (the keeper that moves replicas
back to greener tiers), the carrier of non-workloads, and the accounting of policies by
their ResourceBindings."""
