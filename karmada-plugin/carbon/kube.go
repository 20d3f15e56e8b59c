package carbon

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	clusterlisters "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
)

// KubeFacts reads Clusters from an informer and workload annotations from the Karmada
// API server (the template's, over its PropagationPolicy's).
type KubeFacts struct {
	clusters clusterlisters.ClusterLister
	meta     metadata.Interface
	mapper   meta.ResettableRESTMapper
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
		meta:     metaClient,
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
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
	var obj *metav1.PartialObjectMetadata
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		obj, err = k.meta.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		obj, err = k.meta.Resource(mapping.Resource).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		klog.V(2).InfoS("carbonshift: cannot read annotations", "kind", kind, "name", name, "err", err)
		return nil
	}
	if obj.Annotations == nil {
		return map[string]string{}
	}
	return obj.Annotations
}
