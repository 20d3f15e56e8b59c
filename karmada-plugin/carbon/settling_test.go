package carbon

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
)

func fourCPUCluster(name string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{ResourceSummary: &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:  resource.MustParse("4"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
		}},
	}
}

func assigned(requests string, clusters ...workv1alpha2.TargetCluster) *workv1alpha2.ResourceBinding {
	return &workv1alpha2.ResourceBinding{Spec: workv1alpha2.ResourceBindingSpec{
		ReplicaRequirements: &workv1alpha2.ReplicaRequirements{
			ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(requests)},
		},
		Clusters: clusters,
	}}
}

func estimate(t *testing.T, s *SettlingEstimator, cluster *clusterv1alpha1.Cluster) int32 {
	t.Helper()
	out, err := s.MaxAvailableReplicas(context.Background(), estimatorclient.ReplicaEstimationRequest{
		Clusters: []*clusterv1alpha1.Cluster{cluster},
		ReplicaRequirements: &workv1alpha2.ReplicaRequirements{
			ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		},
	})
	if err != nil || len(out) != 1 {
		t.Fatalf("estimate: %v %v", out, err)
	}
	return out[0].Replicas
}

func TestAssignmentsCountAgainstRoomUntilTheySettle(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSettlingEstimator(15*time.Second, func() time.Time { return now }, nil)
	green := fourCPUCluster("green")
	if got := estimate(t, s, green); got != 4 {
		t.Fatalf("before any assignment: %d, want 4", got)
	}
	first := assigned("1", workv1alpha2.TargetCluster{Name: "green", Replicas: 2})
	s.Observe(nil, first)
	if got := estimate(t, s, green); got != 2 {
		t.Fatalf("two replicas settling: %d, want 2", got)
	}
	// the same binding scaled from 2 to 3 on green: one more settles; a shrink adds nothing
	s.Observe(first, assigned("1", workv1alpha2.TargetCluster{Name: "green", Replicas: 3}))
	s.Observe(nil, assigned("500m", workv1alpha2.TargetCluster{Name: "other", Replicas: 9}))
	if got := estimate(t, s, green); got != 1 {
		t.Fatalf("three replicas settling: %d, want 1", got)
	}
	if green.Status.ResourceSummary.Allocating != nil {
		t.Fatal("the informer's Cluster was changed")
	}
	now = now.Add(16 * time.Second) // the summary shows them by now
	if got := estimate(t, s, green); got != 4 {
		t.Fatalf("after settling: %d, want 4 (the summary's)", got)
	}
}

func TestZeroSettleRecordsNothing(t *testing.T) {
	s := NewSettlingEstimator(0, nil, nil)
	s.Observe(nil, assigned("1", workv1alpha2.TargetCluster{Name: "green", Replicas: 2}))
	if got := estimate(t, s, fourCPUCluster("green")); got != 4 {
		t.Fatalf("got %d, want 4", got)
	}
}

func TestRegisterJoinsTheSchedulersEstimators(t *testing.T) {
	s := NewSettlingEstimator(time.Second, nil, nil)
	s.Register()
	defer delete(estimatorclient.GetReplicaEstimators(), SettlingEstimatorName)
	if estimatorclient.GetReplicaEstimators()[SettlingEstimatorName] != s {
		t.Fatal("not registered")
	}
}

func TestAnAssignmentSettlesOnceTheSummaryShowsIt(t *testing.T) {
	now := time.Unix(1000, 0)
	inUse := map[string]int64{"green": 0}
	s := NewSettlingEstimator(time.Minute, func() time.Time { return now }, func(c string) (int64, bool) {
		v, ok := inUse[c]
		return v, ok
	})
	green := fourCPUCluster("green")
	s.Observe(nil, assigned("1", workv1alpha2.TargetCluster{Name: "green", Replicas: 2}))
	s.Observe(nil, assigned("1", workv1alpha2.TargetCluster{Name: "green", Replicas: 1}))
	if got := estimate(t, s, green); got != 1 {
		t.Fatalf("three replicas settling: %d, want 1", got)
	}
	// the summary shows the first two replicas (2 pods, 2 CPU allocated): one still settles
	summary := green.Status.ResourceSummary
	summary.Allocated = corev1.ResourceList{
		corev1.ResourceCPU:  resource.MustParse("2"),
		corev1.ResourcePods: resource.MustParse("2"),
	}
	if got := estimate(t, s, green); got != 1 {
		t.Fatalf("one replica settling on a summary showing two: %d, want 1", got)
	}
	summary.Allocated = corev1.ResourceList{
		corev1.ResourceCPU:  resource.MustParse("3"),
		corev1.ResourcePods: resource.MustParse("3"),
	}
	if got := estimate(t, s, green); got != 1 {
		t.Fatalf("all shown, nothing counted twice: %d, want 1", got)
	}
}
