"""The leader's controllers: each keeps one concern current while this replica holds the
Lease, as one :meth:`~webhook.controllers.runner.Controller.reconcile` method that the
one periodic runner (:mod:`webhook.controllers.runner`) calls.

- :mod:`~webhook.controllers.follower`: managed objects re-decided and rewritten, with
  the move back to greener tiers (:mod:`~webhook.controllers.rebalancer`) and the
  NodePools' carbon price overlays (:mod:`~webhook.controllers.overlays`);
- :mod:`~webhook.controllers.carry`: non-workloads carried to every tier of the fill;
- :mod:`~webhook.controllers.labels`: intensity labels on Clusters and Liqo virtual nodes;
- :mod:`~webhook.controllers.accounting`: energy, emissions and what was avoided;
- :mod:`~webhook.controllers.ocm_scores`: Open Cluster Management placement scores.

The application manager (:mod:`webhook.app`) builds them from the configuration. They
reach the API server with the adapters of :mod:`webhook.kube` (the connection, list
helpers, leader-gated writes, Events) and the client's typed API classes.
"""
