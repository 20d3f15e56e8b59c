package carbon

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	clusterlisters "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
)

// fixedMapper is a RESTMapper whose Reset does nothing.
type fixedMapper struct{ meta.RESTMapper }

func (fixedMapper) Reset() {}

func objectMeta(apiVersion, kind, ns, name string, annotations map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
	}
}

func kubeFactsFor(t *testing.T, objects ...*metav1.PartialObjectMetadata) *KubeFacts {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "PropagationPolicy"},
		meta.RESTScopeNamespace)
	tracked := make([]runtime.Object, 0, len(objects))
	for _, o := range objects {
		tracked = append(tracked, o)
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range fleet {
		if err := indexer.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return &KubeFacts{
		clusters: clusterlisters.NewClusterLister(indexer),
		meta:     metadatafake.NewSimpleMetadataClient(scheme, tracked...),
		mapper:   fixedMapper{mapper},
	}
}

func TestKubeFactsMergesPolicyAndTemplateAnnotations(t *testing.T) {
	facts := kubeFactsFor(t,
		objectMeta("apps/v1", "Deployment", "ns", "app", map[string]string{
			"carbonshift.io/max-intensity":           "300",
			"propagationpolicy.karmada.io/name":      "pp",
			"propagationpolicy.karmada.io/namespace": "ns",
			"unrelated.example/key":                  "x",
		}),
		objectMeta("policy.karmada.io/v1alpha1", "PropagationPolicy", "ns", "pp", map[string]string{
			"carbonshift.io/max-intensity": "500",
			"carbonshift.io/strategy":      "weighted",
		}),
	)
	got := facts.Annotations(context.Background(), workv1alpha2.ObjectReference{
		APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "app",
	})
	want := map[string]string{"carbonshift.io/max-intensity": "300", "carbonshift.io/strategy": "weighted"}
	if len(got) != len(want) || got["carbonshift.io/max-intensity"] != "300" || got["carbonshift.io/strategy"] != "weighted" {
		t.Fatalf("annotations = %v, want %v", got, want)
	}
	if n := len(facts.Clusters()); n != len(fleet) {
		t.Fatalf("clusters = %d, want %d", n, len(fleet))
	}
}

func TestKubeFactsUnknownKindOrObjectGivesNothing(t *testing.T) {
	facts := kubeFactsFor(t)
	for _, ref := range []workv1alpha2.ObjectReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "missing"},
		{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "w"},
	} {
		if got := facts.Annotations(context.Background(), ref); got != nil {
			t.Errorf("%s: annotations = %v, want nil", ref.Kind, got)
		}
	}
}

func TestKubeFactsReadAnnotationsFromAnInformerOnceItHasSynced(t *testing.T) {
	facts := kubeFactsFor(t,
		objectMeta("apps/v1", "Deployment", "ns", "app", map[string]string{"carbonshift.io/max-intensity": "300"}),
	)
	done := make(chan struct{})
	defer close(done)
	facts.done = done
	facts.watched = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	client := facts.meta.(*metadatafake.FakeMetadataClient)
	ref := workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "app"}
	if got := facts.Annotations(context.Background(), ref); got["carbonshift.io/max-intensity"] != "300" {
		t.Fatalf("first read: %v", got) // the informer is only starting: one GET
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	deadline := time.Now().Add(5 * time.Second)
	for !facts.informer(deployments).HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("the informer did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	client.ClearActions()
	for range 3 {
		if got := facts.Annotations(context.Background(), ref); got["carbonshift.io/max-intensity"] != "300" {
			t.Fatalf("annotations = %v", got)
		}
	}
	for _, action := range client.Actions() {
		if action.GetVerb() == "get" {
			t.Fatalf("a synced informer must answer without a GET, saw %v", action)
		}
	}
	// Not in the informer (yet): one GET, which finds nothing here.
	missing := ref
	missing.Name = "missing"
	if got := facts.Annotations(context.Background(), missing); got != nil {
		t.Fatalf("missing: %v", got)
	}
}
