"""Prometheus metrics. Every name starts with ``carbonshift_``."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series add nothing here

ADMISSIONS = Counter(
    "carbonshift_admissions_total",
    "Admission reviews answered, by object kind and outcome "
    "(patched, unchanged, skipped, ignored, failed_open, bad_request).",
    ["kind", "outcome"],
)
ADMISSION_SECONDS = Histogram(
    "carbonshift_admission_duration_seconds",
    "Server time to answer one admission review.",
    ["kind"],
    buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
REQUESTS_IN_PROGRESS = Gauge(
    "carbonshift_requests_in_progress",
    "HTTPS requests whose headers are in and whose answer is not yet sent, the scrape "
    "that reads this included (a shutdown waits for them).",
)
INTENSITY = Gauge(
    "carbonshift_intensity_gco2eq_per_kwh",
    "Latest carbon intensity held in memory, by grid zone and the provider that gave it.",
    ["zone", "provider"],
)
DATA_AGE = Gauge(
    "carbonshift_intensity_age_seconds",
    "Age of the reading held in memory for a zone (seconds since its period started).",
    ["zone"],
)
UPSTREAM_REQUESTS = Counter(
    "carbonshift_upstream_requests_total",
    "HTTP requests to intensity providers, by provider and result (HTTP status or error).",
    ["provider", "status"],
)
CACHE_LOOKUPS = Counter(
    "carbonshift_cache_lookups_total",
    "Intensity cache lookups by result (hit, miss, stale).",
    ["result"],
)
CIRCUIT_STATE = Gauge(
    "carbonshift_provider_circuit_open",
    "1 while a provider's circuit breaker is open (calls are skipped), else 0.",
    ["provider"],
)
SCHEDULER_REQUESTS = Counter(
    "carbonshift_scheduler_requests_total",
    "Filter/score requests from schedulers, by endpoint and outcome.",
    ["endpoint", "outcome"],
)
SCHEDULER_IGNORED_ANNOTATIONS = Counter(
    "carbonshift_scheduler_ignored_annotations_total",
    "carbonshift.io/* annotations with a malformed value that a filter/score request "
    "ignored (answered without them, with a warning), by API (karmada, extender).",
    ["api", "annotation"],
)
SCHEDULER_SECONDS = Histogram(
    "carbonshift_scheduler_duration_seconds",
    "Server time to answer one filter/score request.",
    ["endpoint"],
    buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1),
)
INTENSITY_STALE = Gauge(
    "carbonshift_intensity_stale",
    "1 while the reading answering for a zone is older than feed.max_age_seconds, else 0.",
    ["zone"],
)
ZONE_DATA_MISSING = Gauge(
    "carbonshift_zone_data_missing",
    "1 while no provider has any reading for a grid zone in use (its clusters rank last), else 0.",
    ["zone"],
)
REQUESTED_ZONES = Gauge(
    "carbonshift_requested_zones",
    "Grid zones kept warm because scheduler requests named them (beside the configuration's "
    "and the fleet's); at most feed.max_requested_zones.",
)
REQUESTED_ZONES_REFUSED = Counter(
    "carbonshift_requested_zones_refused_total",
    "Grid zones a scheduler request named that were answered neutral without being fetched, "
    "by reason (not_served: no provider of the chain serves it; over_limit: "
    "feed.max_requested_zones zones asked for recently are kept already).",
    ["reason"],
)
FORECAST_CHOICE = Gauge(
    "carbonshift_forecast_choice",
    "1 for the forecaster reevaluate.forecast: best uses for a grid zone (day-ahead-profile, "
    "seasonal with feed.seasonal, or provider: the one that ranked the hours of 24 h windows "
    "best), 0 for the others.",
    ["zone", "forecaster"],
)
FORECAST_RANK_QUALITY = Gauge(
    "carbonshift_forecast_rank_quality",
    "Mean Spearman rank correlation of a forecaster's 24 h windows with what was then "
    "observed, over the days the feed kept (absent before its first window).",
    ["zone", "forecaster"],
)
FORECAST_RANK_WINDOWS = Gauge(
    "carbonshift_forecast_rank_windows",
    "Windows carbonshift_forecast_rank_quality rests on, by zone and forecaster.",
    ["zone", "forecaster"],
)
PROVIDER_ERRORS = Counter(
    "carbonshift_provider_errors_total",
    "Provider answers that were errors, by provider and error class "
    "(AuthenticationFailed, RateLimited, IncomparableSignal, CircuitOpen, ...).",
    ["provider", "error"],
)
LEADER = Gauge(
    "carbonshift_leader",
    "1 while this replica holds the leader Lease (only the leader writes), else 0.",
)
KUBE_ERRORS = Counter(
    "carbonshift_kube_errors_total",
    "Failed calls to the Kubernetes API server, by resource and error (HTTP status or class).",
    ["resource", "error"],
)
KUBE_FORBIDDEN = Counter(
    "carbonshift_kube_forbidden_total",
    "Kubernetes API calls refused by RBAC (HTTP 403), by verb and resource.",
    ["verb", "resource"],
)
KUBE_RELISTS = Counter(
    "carbonshift_kube_relists_total",
    "Full lists of a watched resource (start-up, 410 Gone, after an error), by resource.",
    ["resource"],
)
KUBE_CONFLICTS = Counter(
    "carbonshift_kube_conflicts_total",
    "Writes refused with 409 Conflict and retried after re-reading, by resource.",
    ["resource"],
)
FLEET_CLUSTERS = Gauge(
    "carbonshift_fleet_clusters",
    "Karmada Clusters in the fleet inventory, by where their grid zone came from "
    "(label, annotation, config, region-table, unknown).",
    ["source"],
)
FLEET_SKIPPED = Gauge(
    "carbonshift_fleet_skipped_clusters",
    "Karmada Cluster objects left out of the inventory because they are malformed.",
)
FLEET_SYNCED = Gauge(
    "carbonshift_fleet_synced",
    "1 while the fleet inventory follows the API server (listed and watching), else 0.",
)
CLUSTER_LABEL_WRITES = Counter(
    "carbonshift_cluster_label_writes_total",
    "Writes of the carbonshift.io/intensity label and annotations on Karmada Clusters, "
    "by result (written, failed, not_leader).",
    ["result"],
)
CLUSTER_CLASS_CHANGES = Counter(
    "carbonshift_cluster_class_changes_total",
    "Changes of a Karmada Cluster's carbonshift.io/intensity class, by the new class.",
    ["to"],
)
REEVALUATIONS = Counter(
    "carbonshift_reevaluations_total",
    "Re-evaluations of managed objects by the leader, by kind and outcome (kept, switched, "
    "stale, conflict, dropped, user_owned, error).",
    ["kind", "outcome"],
)
FIELDS_DROPPED = Counter(
    "carbonshift_fields_dropped_total",
    "Fields carbonshift wrote that the API server stored with a part dropped (its schema "
    "lacks it: overflowAffinities before Karmada 1.18), found by the leader, by kind and part; "
    "each is decided again in a shape the API keeps.",
    ["kind", "field"],
)
KARMADA_OVERFLOW = Gauge(
    "carbonshift_karmada_overflow",
    "1 while the Karmada policy CRDs keep overflowAffinities (the ordered fill's overflow "
    "tiers), 0 while they do not (failover groups); absent until the CRDs were read.",
)
WRITES = Counter(
    "carbonshift_writes_total",
    "Objects written by the leader's re-evaluation, by kind.",
    ["kind"],
)
CONTROLLER_PASSES = Counter(
    "carbonshift_controller_passes_total",
    "Reconciles of one key that have ended, failed ones included (a keeper's or the "
    "accounting's one key: one pass over the fleet), by leader controller.",
    ["controller"],
)
QUEUE_DEPTH = Gauge(
    "carbonshift_workqueue_depth",
    "Keys a keyed leader controller has queued or scheduled, by controller (0 on the "
    "other replicas).",
    ["controller"],
)
REEVALUATION_SECONDS = Histogram(
    "carbonshift_reevaluation_duration_seconds",
    "Duration of one re-evaluation pass over the managed objects.",
)
_TALLIES: dict[str, Gauge] = {}


def tally(name: str, documentation: str) -> Gauge:
    """The gauge a handled kind declares (:class:`webhook.kinds.base.Tally`, e.g.
    ``carbonshift_paused_nodepools``), registered the first time it is asked for (when the
    re-evaluator is built)."""
    found = _TALLIES.get(name)
    if found is None:
        found = _TALLIES[name] = Gauge(name, documentation)
    return found


SHED = Counter(
    "carbonshift_admissions_shed_total",
    "Admission reviews answered allowed and unchanged without a decision because the server "
    "was at its bound (service.max_concurrent_admissions), by reason.",
    ["reason"],
)
TIMEOUTS = Counter(
    "carbonshift_request_timeouts_total",
    "Requests cut off because a client was too slow, by phase (header: connection closed; "
    "body: answered 408).",
    ["phase"],
)
CLIENT_CERT_REFUSED = Counter(
    "carbonshift_client_certificate_refusals_total",
    "Requests refused (403) for want of a client certificate, by endpoint group "
    "(scheduler, metrics).",
    ["group"],
)
REBALANCES = Counter(
    "carbonshift_rebalances_total",
    "Bindings of managed ordered-fill policies the leader looked at for a move back to "
    "greener tiers, by outcome (moved, not_worth_it, over_budget, no_room, in_flight, lazy, "
    "error).",
    ["outcome"],
)
CARRIED = Counter(
    "carbonshift_carried_total",
    "Non-workload bindings of managed policies whose requiredBy snapshot the leader wrote, by "
    "outcome (carried: sent to every cluster a replica may use, released, error).",
    ["outcome"],
)
LAZY_POLICIES = Gauge(
    "carbonshift_lazy_policies",
    "Managed policies with activationPreference Lazy: Karmada applies their re-evaluated "
    "placement only when the resource template changes, so no move is counted for them.",
)
REPLICAS_MOVED = Counter(
    "carbonshift_replicas_moved_total",
    "Replicas the leader asked Karmada to move back to greener tiers (WorkloadRebalancers).",
)
ACCOUNTING_LABELS = ["kind", "namespace", "name", "signal", "method"]
"""One series per managed object (never per pod) and per signal and energy method."""
ENERGY_KWH = Counter(
    "carbonshift_energy_kwh_total",
    "Energy the leader's carbon accounting counts for a managed object (kWh), by signal of the "
    "intensity and energy method (coefficient, kepler); resumes from the persisted totals.",
    ACCOUNTING_LABELS,
)
EMISSIONS_GRAMS = Counter(
    "carbonshift_emissions_grams_total",
    "Emissions of a managed object where its replicas really ran (gCO2eq; location-based: "
    "energy x the grid average of the zone it ran in, from the intensity data set and year "
    "carbonshift report's basis names; never market-based; embodied included when configured).",
    ACCOUNTING_LABELS,
)
COUNTERFACTUAL_GRAMS = Counter(
    "carbonshift_counterfactual_emissions_grams_total",
    "Emissions the same replicas would have had as the user's own placement divides them, "
    "without carbonshift (gCO2eq; location-based, the same data set and year as the "
    "emissions; never market-based).",
    ACCOUNTING_LABELS,
)
AVOIDED_GRAMS = Gauge(
    "carbonshift_avoided_emissions_grams_total",
    "Counterfactual minus actual emissions of a managed object so far (gCO2eq; location-based "
    "on both sides, the data set and year carbonshift report's basis names, never "
    "market-based; negative when carbonshift's placement emitted more).",
    ACCOUNTING_LABELS,
)
ACCOUNTED = Counter(
    "carbonshift_accounting_passes_total",
    "Accounting passes of the leader, by outcome (accounted, skipped, error; "
    "kepler_unavailable: Kepler's Prometheus could not be asked, energy estimated).",
    ["outcome"],
)
ACCOUNTED_REPLICAS = Gauge(
    "carbonshift_accounted_replicas",
    "Replicas of the managed policies' bindings per member cluster, as of the leader's last "
    "accounting pass.",
    ["cluster"],
)
KUEUE_NOMINATIONS = Counter(
    "carbonshift_kueue_nominations_total",
    "Kueue MultiKueue Workloads the leader nominated worker clusters for, by outcome "
    "(nominated: first nomination by carbon, all_at_once: every active worker at once, as "
    "Kueue's own dispatcher would, for a Workload carbon does not place; widened: a round or "
    "a new worker added workers, error).",
    ["outcome"],
)
KUEUE_WAITING = Gauge(
    "carbonshift_kueue_workloads_waiting",
    "Kueue MultiKueue Workloads on the manager with quota reserved, every other admission "
    "check Ready and no worker nominated for longer than kueue.round_seconds, as of the "
    "leader's last pass (0 on the other replicas): nobody dispatches them.",
)
KUEUE_ORDERS = Counter(
    "carbonshift_kueue_orders_total",
    "MultiKueueConfigs whose spec.clusters the leader put in carbon order, by outcome "
    "(changed, error).",
    ["outcome"],
)
KUEUE_WINDOWS = Counter(
    "carbonshift_kueue_windows_total",
    "Carbon window admission check states the leader wrote on Workloads, by state "
    "(Pending, Ready, error).",
    ["state"],
)
