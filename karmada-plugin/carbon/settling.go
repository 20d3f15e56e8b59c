package carbon

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
)

// SettlingEstimatorName is the name the settling estimator registers under among
// karmada-scheduler's replica estimators (the scheduler takes the minimum of them all).
const SettlingEstimatorName = "carbonshift-settling"

// DefaultSettle is how long an assignment counts as using its cluster's resources
// before the Cluster's resource summary is trusted to show it.
const DefaultSettle = 15 * time.Second

// SettlingEstimator is a replica estimator for karmada-scheduler: Karmada's general
// estimator (from each Cluster's status.resourceSummary) with the replicas the scheduler
// assigned to the cluster added as allocating until the summary shows them (its pods in
// use reach what they were when the replicas were assigned, plus every replica assigned
// since), for at most Settle.
//
// karmada-scheduler v1.18 counts an assignment (SchedulingOvercommitProtection) only until
// the member reports the replicas healthy; the Cluster's resource summary shows them a
// status interval later. Bindings scheduled in that gap see the old room, so a burst of
// them overfills the greenest cluster of an ordered fill (pods stay Pending). Counting
// each assignment for Settle closes the gap; the cost is that for Settle after a burst a
// cluster whose pods in use shrink meanwhile looks fuller than it is (replicas may
// overflow one tier early; carbonshift's leader moves them back once worth it).
type SettlingEstimator struct {
	Settle  time.Duration
	now     func() time.Time
	general estimatorclient.ReplicaEstimator
	// inUse is a cluster's pods in use (allocated + allocating) as its summary says now;
	// false when unknown.
	inUse func(cluster string) (int64, bool)

	mu     sync.Mutex
	recent map[string][]assignment // cluster name -> assignments younger than Settle
}

type assignment struct {
	at       time.Time
	replicas int32
	requests corev1.ResourceList
	// expect is the cluster's pods in use once the summary shows this assignment and every
	// one before it that had not settled yet; 0: unknown (settles by time only).
	expect int64
}

// NewSettlingEstimator wraps Karmada's general estimator; inUse reads a cluster's pods in
// use from its summary (nil: assignments settle by time only).
func NewSettlingEstimator(
	settle time.Duration, now func() time.Time, inUse func(cluster string) (int64, bool),
) *SettlingEstimator {
	if now == nil {
		now = time.Now
	}
	return &SettlingEstimator{
		Settle:  settle,
		now:     now,
		general: estimatorclient.NewGeneralEstimator(),
		inUse:   inUse,
		recent:  map[string][]assignment{},
	}
}

// PodsInUse is a summary's allocated + allocating pods; false without a summary.
func PodsInUse(summary *clusterv1alpha1.ResourceSummary) (int64, bool) {
	if summary == nil {
		return 0, false
	}
	allocated, allocating := summary.Allocated[corev1.ResourcePods], summary.Allocating[corev1.ResourcePods]
	return allocated.Value() + allocating.Value(), true
}

// Register adds the estimator to karmada-scheduler's replica estimators; call it before
// the scheduler starts.
func (s *SettlingEstimator) Register() {
	estimatorclient.GetReplicaEstimators()[SettlingEstimatorName] = s
}

// Observe records what a binding update assigned: every cluster whose replicas grew.
func (s *SettlingEstimator) Observe(old, updated *workv1alpha2.ResourceBinding) {
	if updated == nil || s.Settle <= 0 {
		return
	}
	before := map[string]int32{}
	if old != nil {
		for _, target := range old.Spec.Clusters {
			before[target.Name] = target.Replicas
		}
	}
	var requests corev1.ResourceList
	if r := updated.Spec.ReplicaRequirements; r != nil {
		requests = r.ResourceRequest
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, target := range updated.Spec.Clusters {
		grown := target.Replicas - before[target.Name]
		if grown <= 0 {
			continue
		}
		entry := assignment{at: now, replicas: grown, requests: requests}
		if s.inUse != nil {
			if base, ok := s.inUse(target.Name); ok {
				pending := s.recent[target.Name]
				if n := len(pending); n > 0 && pending[n-1].expect > base {
					base = pending[n-1].expect
				}
				entry.expect = base + int64(grown)
			}
		}
		s.recent[target.Name] = append(s.recent[target.Name], entry)
	}
}

// settling returns the assignments to a cluster its summary does not show yet (inUse:
// its pods in use now, known or not) and younger than Settle; the others are dropped.
func (s *SettlingEstimator) settling(cluster string, inUse int64, known bool) []assignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := s.recent[cluster]
	cutoff := s.now().Add(-s.Settle)
	kept := entries[:0]
	for _, e := range entries {
		shown := known && e.expect > 0 && inUse >= e.expect
		if e.at.After(cutoff) && !shown {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		delete(s.recent, cluster)
		return nil
	}
	s.recent[cluster] = kept
	return append([]assignment(nil), kept...)
}

// MaxAvailableReplicas is the general estimate over the summaries plus what settles.
func (s *SettlingEstimator) MaxAvailableReplicas(
	ctx context.Context, req estimatorclient.ReplicaEstimationRequest,
) ([]workv1alpha2.TargetCluster, error) {
	clusters := make([]*clusterv1alpha1.Cluster, len(req.Clusters))
	for i, cluster := range req.Clusters {
		clusters[i] = s.withSettling(cluster)
	}
	req.Clusters = clusters
	return s.general.MaxAvailableReplicas(ctx, req)
}

// MaxAvailableComponentSets leaves multi-component workloads to the general estimator.
func (s *SettlingEstimator) MaxAvailableComponentSets(
	ctx context.Context, req estimatorclient.ComponentSetEstimationRequest,
) ([]estimatorclient.ComponentSetEstimationResponse, error) {
	return s.general.MaxAvailableComponentSets(ctx, req)
}

func (s *SettlingEstimator) withSettling(cluster *clusterv1alpha1.Cluster) *clusterv1alpha1.Cluster {
	if cluster == nil || cluster.Status.ResourceSummary == nil {
		return cluster
	}
	inUse, known := PodsInUse(cluster.Status.ResourceSummary)
	entries := s.settling(cluster.Name, inUse, known)
	if len(entries) == 0 {
		return cluster
	}
	out := cluster.DeepCopy()
	summary := out.Status.ResourceSummary
	if summary.Allocating == nil {
		summary.Allocating = corev1.ResourceList{}
	}
	for _, e := range entries {
		add(summary.Allocating, corev1.ResourcePods, *resource.NewQuantity(int64(e.replicas), resource.DecimalSI))
		for name, per := range e.requests {
			total := per.DeepCopy()
			total.Mul(int64(e.replicas))
			add(summary.Allocating, name, total)
		}
	}
	return out
}

func add(list corev1.ResourceList, name corev1.ResourceName, amount resource.Quantity) {
	sum := list[name]
	sum.Add(amount)
	list[name] = sum
}
