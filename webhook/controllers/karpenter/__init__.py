"""The leader's controllers for Karpenter: the carbon prices on NodeOverlays (a keeper)
and the accounting of NodePools by their Nodes' vCPUs."""
