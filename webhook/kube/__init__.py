"""Adapters on kubernetes-asyncio: the only code that talks to the API server (the leader's
controllers, :mod:`webhook.controllers`, use them).

- :mod:`~webhook.kube.client`: where the API server is (``--kubeconfig``, ``KUBECONFIG``,
  in-cluster), backoff, one warning per outage, RBAC 403 reporting;
- :mod:`~webhook.kube.watch`: list+watch with resourceVersion, bookmarks, re-list on 410;
- :mod:`~webhook.kube.inventory`, :mod:`~webhook.kube.peers`, :mod:`~webhook.kube.nodes`:
  what the fleet looks like, followed in memory (Karmada Clusters, Liqo virtual nodes,
  the Nodes' grid zone);
- :mod:`~webhook.kube.leader`: Lease leader election (only the leader writes);
- :mod:`~webhook.kube.writes`: server-side apply and resourceVersion-checked updates;
- :mod:`~webhook.kube.events`: ``events.k8s.io/v1`` Events.

Nothing here is imported unless carbonshift is given a cluster to talk to.
"""
