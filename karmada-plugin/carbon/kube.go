package carbon

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	clusterlisters "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
)

// KubeFacts reads Clusters from an informer and workload annotations from the Karmada
// API server (the template's, over its PropagationPolicy's). Annotations come from a
// metadata-only informer per resource kind, started the first time a binding of that kind
// is scheduled, so a scheduling cycle asks the API server nothing; an object the informer
// does not hold yet (just created, or its cache still syncing) is read with one GET.
type KubeFacts struct {
	clusters clusterlisters.ClusterLister
	factory  karmadainformers.SharedInformerFactory
	meta     metadata.Interface
	mapper   meta.ResettableRESTMapper
	// done ends the informers (the plugin's lifetime); nil: no informers, GETs only.
	done    <-chan struct{}
	mu      sync.Mutex
	watched map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// NewKubeFacts starts a Cluster informer that lives as long as ctx.
func NewKubeFacts(ctx context.Context, cfg *rest.Config) (*KubeFacts, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	karmada, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	metaClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := karmadainformers.NewSharedInformerFactory(karmada, 0)
	lister := factory.Cluster().V1alpha1().Clusters().Lister()
	factory.Start(ctx.Done())
	return &KubeFacts{
		clusters: lister,
		factory:  factory,
		meta:     metaClient,
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		done:     ctx.Done(),
		watched:  map[schema.GroupVersionResource]cache.SharedIndexInformer{},
	}, nil
}

// ObserveBindings calls observe with every ResourceBinding update (old nil on add), from
// an informer that lives as long as the plugin.
func (k *KubeFacts) ObserveBindings(observe func(old, updated *workv1alpha2.ResourceBinding)) error {
	informer := k.factory.Work().V1alpha2().ResourceBindings().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if rb, ok := obj.(*workv1alpha2.ResourceBinding); ok {
				observe(nil, rb)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, _ := oldObj.(*workv1alpha2.ResourceBinding)
			if rb, ok := newObj.(*workv1alpha2.ResourceBinding); ok {
				observe(old, rb)
			}
		},
	})
	if err != nil {
		return err
	}
	k.factory.Start(k.done)
	return nil
}

// PodsInUse is a Cluster's allocated + allocating pods from the informer's summary.
func (k *KubeFacts) PodsInUse(name string) (int64, bool) {
	cluster, err := k.clusters.Get(name)
	if err != nil {
		return 0, false
	}
	return PodsInUse(cluster.Status.ResourceSummary)
}

// Clusters lists the informer's clusters.
func (k *KubeFacts) Clusters() []*clusterv1alpha1.Cluster {
	list, err := k.clusters.List(labels.Everything())
	if err != nil {
		return nil
	}
	return list
}

// Annotations returns the carbonshift.io/ annotations of the policy that claimed the
// template, overridden by the template's own. Errors leave the annotations out.
func (k *KubeFacts) Annotations(ctx context.Context, ref workv1alpha2.ObjectReference) map[string]string {
	template := k.annotationsOf(ctx, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name)
	if template == nil {
		return nil
	}
	out := map[string]string{}
	policy := policyv1alpha1.SchemeGroupVersion.String()
	if name := template[policyv1alpha1.PropagationPolicyNameAnnotation]; name != "" {
		ns := template[policyv1alpha1.PropagationPolicyNamespaceAnnotation]
		copyCarbon(out, k.annotationsOf(ctx, policy, "PropagationPolicy", ns, name))
	} else if name := template[policyv1alpha1.ClusterPropagationPolicyAnnotation]; name != "" {
		copyCarbon(out, k.annotationsOf(ctx, policy, "ClusterPropagationPolicy", "", name))
	}
	copyCarbon(out, template)
	return out
}

func copyCarbon(dst, src map[string]string) {
	for key, value := range src {
		if strings.HasPrefix(key, AnnotationPrefix) {
			dst[key] = value
		}
	}
}

func (k *KubeFacts) annotationsOf(ctx context.Context, apiVersion, kind, ns, name string) map[string]string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || name == "" {
		return nil
	}
	mapping, err := k.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if meta.IsNoMatchError(err) {
		k.mapper.Reset()
		mapping, err = k.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	}
	if err != nil {
		klog.V(2).InfoS("carbonshift: no REST mapping", "kind", kind, "err", err)
		return nil
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	obj, err := k.object(ctx, mapping.Resource, ns, name)
	if err != nil {
		klog.V(2).InfoS("carbonshift: cannot read annotations", "kind", kind, "name", name, "err", err)
		return nil
	}
	if obj.Annotations == nil {
		return map[string]string{}
	}
	return obj.Annotations
}

// object is the metadata of one object: from the informer of its resource when it holds
// it, else one GET.
func (k *KubeFacts) object(ctx context.Context, gvr schema.GroupVersionResource, ns, name string,
) (*metav1.PartialObjectMetadata, error) {
	if informer := k.informer(gvr); informer != nil && informer.HasSynced() {
		key := name
		if ns != "" {
			key = ns + "/" + name
		}
		if item, ok, _ := informer.GetStore().GetByKey(key); ok {
			if obj, ok := item.(*metav1.PartialObjectMetadata); ok {
				return obj, nil
			}
		}
	}
	client := k.meta.Resource(gvr)
	if ns != "" {
		return client.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return client.Get(ctx, name, metav1.GetOptions{})
}

// informer returns the metadata informer of gvr, starting it the first time.
func (k *KubeFacts) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if k.done == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	informer, ok := k.watched[gvr]
	if !ok {
		informer = metadatainformer.NewFilteredMetadataInformer(
			k.meta, gvr, metav1.NamespaceAll, 10*time.Minute, cache.Indexers{}, nil,
		).Informer()
		k.watched[gvr] = informer
		go informer.Run(k.done)
	}
	return informer
}
