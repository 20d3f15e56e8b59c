"""Thin adapters on kubernetes-asyncio: the only code that talks to the API server.

- :mod:`~webhook.kube.client`: where the API server is (``--kubeconfig``, ``KUBECONFIG``,
  in-cluster), backoff, one warning per outage, RBAC 403 reporting;
- :mod:`~webhook.kube.watch`: list+watch with resourceVersion, bookmarks, re-list on 410;
- :mod:`~webhook.kube.inventory`: the fleet inventory (Karmada Clusters) in memory;
- :mod:`~webhook.kube.leader`: Lease leader election (only the leader writes);
- :mod:`~webhook.kube.writes`: server-side apply and resourceVersion-checked updates;
- :mod:`~webhook.kube.events`: ``events.k8s.io/v1`` Events.

Nothing here is imported unless carbonshift is given a cluster to talk to.
"""
