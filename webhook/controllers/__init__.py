"""The leader's controllers: each keeps one concern current while this replica holds the
Lease, as one ``reconcile`` method run by :mod:`webhook.controllers.runner` (one key at
a time from a work queue fed by watched caches; one key for a plan of the whole fleet).

Generic, naming no technology:

- :mod:`~webhook.controllers.follower`: managed objects re-decided and rewritten;
- :mod:`~webhook.controllers.keeper`: what runs once the follower has settled, on the
  objects of its kinds as they stand;
- :mod:`~webhook.controllers.accounting`: energy, emissions and what was avoided, over the
  hooks the integrations' rows carry;
- :mod:`~webhook.controllers.labels`: intensity labels on Clusters and Liqo virtual nodes.

A sub-package per technology: :mod:`~webhook.controllers.karmada` (the rebalancer, the
carrier, the bindings' accounting), :mod:`~webhook.controllers.karpenter` (carbon prices,
the Nodes' accounting), :mod:`~webhook.controllers.liqo` (the offloaded pods' accounting),
:mod:`~webhook.controllers.ocm` (placement scores) and :mod:`~webhook.controllers.kueue`
(the dispatcher and the carbon window).

The integrations' rows (:mod:`webhook.integrations`) build them from the configuration.
They reach the API server with the adapters of :mod:`webhook.kube` (the connection, list
helpers, leader-gated writes, Events) and the client's typed API classes.
"""
