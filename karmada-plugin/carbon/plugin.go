// Package carbon is a Karmada scheduler plugin that filters and scores member clusters
// by grid carbon intensity, by asking the carbonshift scheduler API.
//
// Karmada calls Filter and Score once per cluster. The plugin answers all clusters from
// one batched request, kept for a short TTL and shared by every binding whose workload
// carries the same carbonshift.io/ annotations: carbonshift's answer depends on the
// clusters and those annotations only (its scheduler API reads nothing else of the
// workload), so a burst of bindings costs one request per operation, not one per binding.
// The annotations are read once per template revision (and TTL).
// When carbonshift cannot be reached or refuses the request it fails open: every
// cluster passes the filter and gets the neutral score. Every failed call is counted
// (carbonshift_plugin_api_calls_total{result="error"} on karmada-scheduler's metrics
// endpoint) and logged, at most once per 30 s with the number held back; warnings in
// carbonshift's answers are counted and logged the same way.
package carbon

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
)

const (
	// Name is the plugin name for --plugins (e.g. --plugins=*,CarbonAware is implied by *).
	Name = "CarbonAware"
	// NeutralScore is the score of a cluster whose intensity is unknown or when the API fails.
	NeutralScore int64 = 50
	// AnnotationPrefix marks the workload and policy annotations sent to carbonshift.
	AnnotationPrefix = "carbonshift.io/"
	// GridZoneLabel on a Cluster names its grid zone directly (it wins over provider/region).
	GridZoneLabel = "carbonshift.io/grid-zone"
	// maxEntries triggers a sweep of expired cache entries.
	maxEntries = 512
)

// Facts supplies what a Filter or Score call does not receive: the other clusters of
// the fleet (to batch them into one request) and the workload's carbonshift annotations.
type Facts interface {
	// Clusters lists every known member cluster (possibly empty while caches warm up).
	Clusters() []*clusterv1alpha1.Cluster
	// Annotations returns the carbonshift.io/ annotations for the workload (nil if unknown).
	Annotations(ctx context.Context, ref workv1alpha2.ObjectReference) map[string]string
}

// noFacts is used when the plugin has no Kubernetes client: one cluster per request.
type noFacts struct{}

func (noFacts) Clusters() []*clusterv1alpha1.Cluster { return nil }
func (noFacts) Annotations(context.Context, workv1alpha2.ObjectReference) map[string]string {
	return nil
}

// verdict is the cached answer for one operation and one set of workload annotations.
type verdict struct {
	expires time.Time
	covered map[string]struct{} // clusters the answer speaks about
	removed map[string]string   // filter: cluster -> reason
	scores  map[string]int64    // score: cluster -> 0..100
	failed  bool                // the API call failed: fail open for every cluster
}

func (v *verdict) covers(cluster string) bool {
	if v.failed {
		return true
	}
	_, ok := v.covered[cluster]
	return ok
}

// Plugin implements framework.FilterPlugin and framework.ScorePlugin.
type Plugin struct {
	api     *Client
	facts   Facts
	timeout time.Duration
	ttl     time.Duration
	failTTL time.Duration
	now     func() time.Time

	mu        sync.Mutex
	entries   map[string]*verdict
	workloads map[string]*workloadEntry // workloadKey -> the workload facts read
	flight    singleflight.Group
	failing   atomic.Bool
	calls     atomic.Int64
	failures  atomic.Int64
	failLog   limiter
	warnLog   limiter
}

var (
	_ framework.FilterPlugin = (*Plugin)(nil)
	_ framework.ScorePlugin  = (*Plugin)(nil)
)

// New builds the plugin. facts may be nil (then every request carries one cluster and
// no workload annotations).
func New(opts Options, facts Facts) (*Plugin, error) {
	files := TLSFiles{CA: opts.CAFile, Cert: opts.CertFile, Key: opts.KeyFile}
	api, err := NewClient(opts.URL, files, opts.Timeout)
	if err != nil {
		return nil, err
	}
	if facts == nil {
		facts = noFacts{}
	}
	failTTL := min(opts.CacheTTL, 5*time.Second)
	return &Plugin{
		api:       api,
		facts:     facts,
		timeout:   opts.Timeout,
		ttl:       opts.CacheTTL,
		failTTL:   failTTL,
		now:       time.Now,
		entries:   map[string]*verdict{},
		workloads: map[string]*workloadEntry{},
		failLog:   limiter{every: logEvery},
		warnLog:   limiter{every: logEvery},
	}, nil
}

// Name returns the plugin name.
func (p *Plugin) Name() string { return Name }

// Filter removes a cluster whose grid is above the workload's carbonshift.io/max-intensity.
func (p *Plugin) Filter(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec,
	_ *workv1alpha2.ResourceBindingStatus, cluster *clusterv1alpha1.Cluster) *framework.Result {
	v := p.decide(ctx, "filter", spec, cluster)
	if reason, gone := v.removed[cluster.Name]; gone && !v.failed {
		return framework.NewResult(framework.Unschedulable, "carbonshift: "+reason)
	}
	return framework.NewResult(framework.Success)
}

// Score returns the cluster's greenness 0..100 (greener higher).
func (p *Plugin) Score(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec,
	cluster *clusterv1alpha1.Cluster) (int64, *framework.Result) {
	v := p.decide(ctx, "score", spec, cluster)
	score, ok := v.scores[cluster.Name]
	if v.failed || !ok {
		score = NeutralScore
	}
	return min(max(score, framework.MinClusterScore), framework.MaxClusterScore),
		framework.NewResult(framework.Success)
}

// ScoreExtensions returns nil: scores are absolute and already in 0..100.
func (p *Plugin) ScoreExtensions() framework.ScoreExtensions { return nil }

// Calls reports how many API requests the plugin made (for tests and debugging).
func (p *Plugin) Calls() int64 { return p.calls.Load() }

// decide returns the cached verdict for (op, workload annotations) covering cluster,
// asking the API once for all known clusters when there is none.
func (p *Plugin) decide(ctx context.Context, op string, spec *workv1alpha2.ResourceBindingSpec,
	cluster *clusterv1alpha1.Cluster) *verdict {
	w := p.workloadOf(ctx, spec)
	key := op + "/" + w.key
	if v := p.lookup(key); v != nil && v.covers(cluster.Name) {
		return v
	}
	res, _, _ := p.flight.Do(key, func() (any, error) {
		old := p.lookup(key)
		if old != nil && old.covers(cluster.Name) {
			return old, nil
		}
		return p.merge(key, p.fetch(ctx, op, w.facts, cluster)), nil
	})
	v := res.(*verdict)
	if !v.covers(cluster.Name) { // a concurrent caller fetched without this cluster
		v = p.merge(key, p.fetch(ctx, op, w.facts, cluster))
	}
	return v
}

// workloadEntry is what one template revision's workload looks like to carbonshift.
type workloadEntry struct {
	facts   *WorkloadFacts
	key     string // the carbonshift.io/ annotations, canonical
	expires time.Time
}

// workloadOf reads the workload's facts once per template revision (and TTL).
func (p *Plugin) workloadOf(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec) *workloadEntry {
	rev := workloadKey(spec)
	now := p.now()
	p.mu.Lock()
	w := p.workloads[rev]
	p.mu.Unlock()
	if w != nil && !now.After(w.expires) {
		return w
	}
	facts := p.workload(ctx, spec)
	w = &workloadEntry{facts: facts, key: annotationKey(facts.Annotations), expires: now.Add(p.ttl)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.workloads) >= maxEntries {
		for k, e := range p.workloads {
			if now.After(e.expires) {
				delete(p.workloads, k)
			}
		}
	}
	p.workloads[rev] = w
	return w
}

// annotationKey is a canonical form of the annotations (sorted key=value lines).
func annotationKey(annotations map[string]string) string {
	lines := make([]string, 0, len(annotations))
	for k, v := range annotations {
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (p *Plugin) lookup(key string) *verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.entries[key]
	if v == nil || p.now().After(v.expires) {
		return nil
	}
	return v
}

// merge stores fresh under key, keeping what a still valid entry knew about clusters
// fresh does not cover (a cluster that appeared after the first batch is added).
func (p *Plugin) merge(key string, fresh *verdict) *verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if len(p.entries) >= maxEntries {
		for k, e := range p.entries {
			if now.After(e.expires) {
				delete(p.entries, k)
			}
		}
	}
	if old := p.entries[key]; old != nil && !old.failed && !fresh.failed && !now.After(old.expires) {
		for name := range old.covered {
			if _, ok := fresh.covered[name]; ok {
				continue
			}
			fresh.covered[name] = struct{}{}
			if reason, ok := old.removed[name]; ok {
				fresh.removed[name] = reason
			}
			if score, ok := old.scores[name]; ok {
				fresh.scores[name] = score
			}
		}
	}
	p.entries[key] = fresh
	return fresh
}

// fetch asks the API about every known cluster plus the one at hand.
func (p *Plugin) fetch(ctx context.Context, op string, workload *WorkloadFacts,
	cluster *clusterv1alpha1.Cluster) *verdict {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req := &Request{Clusters: p.candidates(cluster), Workload: workload}
	p.calls.Add(1)
	v := &verdict{covered: map[string]struct{}{}, removed: map[string]string{}, scores: map[string]int64{}}
	var err error
	var warnings []string
	if op == "filter" {
		warnings, err = p.fillFilter(ctx, req, v)
	} else {
		warnings, err = p.fillScore(ctx, req, v)
	}
	if err != nil {
		p.reportFailure(op, err)
		return &verdict{failed: true, expires: p.now().Add(p.failTTL)}
	}
	p.reportSuccess(op, warnings)
	v.expires = p.now().Add(p.ttl)
	return v
}

func (p *Plugin) fillFilter(ctx context.Context, req *Request, v *verdict) ([]string, error) {
	resp, err := p.api.Filter(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, name := range resp.Clusters {
		v.covered[name] = struct{}{}
	}
	for _, f := range resp.Filtered {
		v.covered[f.Name] = struct{}{}
		v.removed[f.Name] = f.Reason
	}
	return resp.Warnings, nil
}

func (p *Plugin) fillScore(ctx context.Context, req *Request, v *verdict) ([]string, error) {
	resp, err := p.api.Score(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, s := range resp.Scores {
		v.covered[s.Name] = struct{}{}
		v.scores[s.Name] = s.Score
	}
	return resp.Warnings, nil
}

// candidates lists every known cluster (sorted by the lister's order) and the one at hand.
func (p *Plugin) candidates(cluster *clusterv1alpha1.Cluster) []ClusterFacts {
	all := p.facts.Clusters()
	out := make([]ClusterFacts, 0, len(all)+1)
	seen := false
	for _, c := range all {
		if c.DeletionTimestamp != nil {
			continue
		}
		seen = seen || c.Name == cluster.Name
		out = append(out, FactsOf(c))
	}
	if !seen {
		out = append(out, FactsOf(cluster))
	}
	return out
}

func (p *Plugin) workload(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec) *WorkloadFacts {
	ref := spec.Resource
	return &WorkloadFacts{
		Namespace:   ref.Namespace,
		Name:        ref.Name,
		Kind:        ref.Kind,
		Replicas:    spec.Replicas,
		Annotations: p.facts.Annotations(ctx, ref),
	}
}

// FactsOf converts a Karmada Cluster into the API's cluster facts.
func FactsOf(c *clusterv1alpha1.Cluster) ClusterFacts {
	zones := c.Spec.Zones
	if len(zones) == 0 && c.Spec.Zone != "" { //nolint:staticcheck // deprecated field, still honoured
		zones = []string{c.Spec.Zone} //nolint:staticcheck
	}
	return ClusterFacts{
		Name:     c.Name,
		Zone:     c.Labels[GridZoneLabel],
		Provider: c.Spec.Provider,
		Region:   c.Spec.Region,
		Zones:    zones,
		Labels:   c.Labels,
	}
}

// workloadKey identifies the workload a binding schedules as its template stands (the
// template's resource version changes with every edit of it). Karmada calls Filter and
// Score once per cluster, so this runs thousands of times per binding: it is a plain
// string join, no encoding or hashing.
func workloadKey(spec *workv1alpha2.ResourceBindingSpec) string {
	ref := spec.Resource
	return strings.Join([]string{
		ref.Namespace, ref.Kind, ref.Name, string(ref.UID), ref.ResourceVersion,
		strconv.FormatInt(int64(spec.Replicas), 10),
	}, "/")
}
