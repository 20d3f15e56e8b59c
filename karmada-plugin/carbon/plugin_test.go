package carbon

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
)

func cluster(name, provider, region string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       clusterv1alpha1.ClusterSpec{Provider: provider, Region: region},
	}
}

var fleet = []*clusterv1alpha1.Cluster{
	cluster("green", "aws", "eu-west-3"),
	cluster("dirty", "aws", "ap-south-1"),
	cluster("mid", "aws", "eu-central-1"),
}

type fakeFacts struct {
	clusters    []*clusterv1alpha1.Cluster
	annotations map[string]string
}

func (f fakeFacts) Clusters() []*clusterv1alpha1.Cluster { return f.clusters }
func (f fakeFacts) Annotations(context.Context, workv1alpha2.ObjectReference) map[string]string {
	return f.annotations
}

// fakeAPI answers like carbonshift: "dirty" is removed by the filter, scores by name.
type fakeAPI struct {
	server   *httptest.Server
	requests atomic.Int64
	last     atomic.Pointer[Request]
}

func newFakeAPI(t *testing.T, delay time.Duration) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	scores := map[string]int64{"green": 95, "dirty": 35, "mid": 60}
	mux := http.NewServeMux()
	decode := func(w http.ResponseWriter, r *http.Request) *Request {
		f.requests.Add(1)
		time.Sleep(delay)
		req := &Request{}
		if err := json.NewDecoder(r.Body).Decode(req); err != nil {
			http.Error(w, `{"error":"clusters[0].name: bad"}`, http.StatusBadRequest)
			return nil
		}
		f.last.Store(req)
		return req
	}
	mux.HandleFunc("POST /v1/karmada/filter", func(w http.ResponseWriter, r *http.Request) {
		req := decode(w, r)
		if req == nil {
			return
		}
		resp := FilterResponse{Clusters: []string{}, Filtered: []Filtered{}}
		for _, c := range req.Clusters {
			if c.Name == "dirty" && req.Workload != nil && req.Workload.Annotations["carbonshift.io/max-intensity"] != "" {
				resp.Filtered = append(resp.Filtered, Filtered{Name: c.Name, Reason: "above max-intensity"})
			} else {
				resp.Clusters = append(resp.Clusters, c.Name)
			}
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	mux.HandleFunc("POST /v1/karmada/score", func(w http.ResponseWriter, r *http.Request) {
		req := decode(w, r)
		if req == nil {
			return
		}
		resp := ScoreResponse{}
		for _, c := range req.Clusters {
			score, ok := scores[c.Name]
			if !ok {
				score = NeutralScore
			}
			resp.Scores = append(resp.Scores, ClusterScore{Name: c.Name, Score: score})
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	f.server = httptest.NewServer(mux)
	t.Cleanup(f.server.Close)
	return f
}

func newPlugin(t *testing.T, url string, facts Facts) *Plugin {
	t.Helper()
	p, err := New(Options{URL: url, Timeout: 200 * time.Millisecond, CacheTTL: time.Minute}, facts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func binding(generation string) *workv1alpha2.ResourceBindingSpec {
	return &workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "app",
			UID: "u1", ResourceVersion: generation,
		},
		Replicas: 10,
	}
}

func TestFilterBatchesAllClustersOfABindingIntoOneRequest(t *testing.T) {
	api := newFakeAPI(t, 0)
	annotations := map[string]string{"carbonshift.io/max-intensity": "300"}
	p := newPlugin(t, api.server.URL, fakeFacts{clusters: fleet, annotations: annotations})
	spec := binding("1")
	got := map[string]bool{}
	for _, c := range fleet {
		got[c.Name] = p.Filter(context.Background(), spec, nil, c).IsSuccess()
	}
	want := map[string]bool{"green": true, "dirty": false, "mid": true}
	for name, ok := range want {
		if got[name] != ok {
			t.Errorf("Filter(%s) success = %v, want %v", name, got[name], ok)
		}
	}
	if n := api.requests.Load(); n != 1 {
		t.Fatalf("API requests = %d, want 1 for one binding revision", n)
	}
	req := api.last.Load()
	if len(req.Clusters) != 3 || req.Workload.Name != "app" || req.Workload.Replicas != 10 ||
		req.Workload.Annotations["carbonshift.io/max-intensity"] != "300" {
		t.Fatalf("unexpected request %+v", req)
	}
	if req.Clusters[0].Provider != "aws" || req.Clusters[0].Region != "eu-west-3" {
		t.Fatalf("cluster facts not sent: %+v", req.Clusters[0])
	}
	reasons := p.Filter(context.Background(), spec, nil, fleet[1]).Reasons()
	if len(reasons) != 1 || reasons[0] != "carbonshift: above max-intensity" {
		t.Fatalf("reasons = %v", reasons)
	}

}

func TestBindingsWithTheSameAnnotationsShareOneAnswer(t *testing.T) {
	api := newFakeAPI(t, 0)
	facts := &fakeFacts{clusters: fleet, annotations: map[string]string{"carbonshift.io/max-intensity": "300"}}
	p := newPlugin(t, api.server.URL, facts)
	for _, rev := range []string{"1", "2", "3"} { // three bindings, or revisions of one
		for _, c := range fleet {
			p.Filter(context.Background(), binding(rev), nil, c)
			p.Score(context.Background(), binding(rev), c)
		}
	}
	if n := api.requests.Load(); n != 2 {
		t.Fatalf("API requests = %d, want one filter and one score for the same annotations", n)
	}
	// Another limit is another answer: the dirty cluster now passes.
	facts.annotations = map[string]string{}
	if !p.Filter(context.Background(), binding("4"), nil, fleet[1]).IsSuccess() {
		t.Fatal("without max-intensity the dirty cluster must pass")
	}
	if n := api.requests.Load(); n != 3 {
		t.Fatalf("API requests = %d, want a new filter request for other annotations", n)
	}
	// A revision already read keeps its annotations until the TTL.
	if p.Filter(context.Background(), binding("1"), nil, fleet[1]).IsSuccess() {
		t.Fatal("revision 1 was read with max-intensity 300: the dirty cluster stays out")
	}
}

func TestAnnotationKeyIsCanonical(t *testing.T) {
	a := annotationKey(map[string]string{"carbonshift.io/a": "1", "carbonshift.io/b": "2"})
	b := annotationKey(map[string]string{"carbonshift.io/b": "2", "carbonshift.io/a": "1"})
	if a != b || a == annotationKey(nil) {
		t.Fatalf("keys %q %q", a, b)
	}
}

func TestScoreReturnsTheAPIScoresOncePerBinding(t *testing.T) {
	api := newFakeAPI(t, 0)
	p := newPlugin(t, api.server.URL, fakeFacts{clusters: fleet})
	spec := binding("1")
	for _, c := range fleet {
		score, res := p.Score(context.Background(), spec, c)
		if !res.IsSuccess() {
			t.Fatalf("Score(%s) failed: %v", c.Name, res.AsError())
		}
		want := map[string]int64{"green": 95, "dirty": 35, "mid": 60}[c.Name]
		if score != want {
			t.Errorf("Score(%s) = %d, want %d", c.Name, score, want)
		}
	}
	if n := api.requests.Load(); n != 1 {
		t.Fatalf("API requests = %d, want 1", n)
	}
	if p.ScoreExtensions() != nil {
		t.Fatal("scores are absolute: no normalization expected")
	}
}

func TestWithoutFactsEachClusterIsAskedAlone(t *testing.T) {
	api := newFakeAPI(t, 0)
	p := newPlugin(t, api.server.URL, nil)
	spec := binding("1")
	for _, c := range fleet {
		p.Score(context.Background(), spec, c)
	}
	p.Score(context.Background(), spec, fleet[0]) // cached
	if n := api.requests.Load(); n != 3 {
		t.Fatalf("API requests = %d, want one per cluster", n)
	}
}

func TestNewClusterAfterCachingIsAskedFor(t *testing.T) {
	api := newFakeAPI(t, 0)
	facts := &fakeFacts{clusters: fleet[:2]}
	p := newPlugin(t, api.server.URL, facts)
	spec := binding("1")
	p.Score(context.Background(), spec, fleet[0])
	score, _ := p.Score(context.Background(), spec, fleet[2])
	if score != 60 {
		t.Fatalf("score of a cluster missing from the first batch = %d, want 60", score)
	}
}

func TestFailOpenOnTimeoutAndOnError(t *testing.T) {
	slow := newFakeAPI(t, time.Second)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer down.Close()
	for name, url := range map[string]string{"timeout": slow.server.URL, "error": down.URL, "refused": "http://127.0.0.1:1"} {
		t.Run(name, func(t *testing.T) {
			p := newPlugin(t, url, fakeFacts{clusters: fleet, annotations: map[string]string{"carbonshift.io/max-intensity": "1"}})
			spec := binding("1")
			start := time.Now()
			for _, c := range fleet {
				if res := p.Filter(context.Background(), spec, nil, c); !res.IsSuccess() {
					t.Errorf("Filter(%s) = %v, want success (fail open)", c.Name, res.AsError())
				}
				score, res := p.Score(context.Background(), spec, c)
				if !res.IsSuccess() || score != NeutralScore {
					t.Errorf("Score(%s) = %d %v, want neutral success", c.Name, score, res)
				}
			}
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("fail-open took %v: the failure should be cached per binding", elapsed)
			}
			if p.Calls() != 2 {
				t.Errorf("calls = %d, want one filter and one score attempt", p.Calls())
			}
			if !p.failing.Load() {
				t.Error("failure not recorded")
			}
		})
	}
}

func TestRecoveryClearsTheFailure(t *testing.T) {
	api := newFakeAPI(t, 0)
	p := newPlugin(t, api.server.URL, fakeFacts{clusters: fleet})
	p.failing.Store(true)
	p.Score(context.Background(), binding("1"), fleet[0])
	if p.failing.Load() {
		t.Fatal("a successful answer should clear the failure state")
	}
}

func TestCacheExpires(t *testing.T) {
	api := newFakeAPI(t, 0)
	p := newPlugin(t, api.server.URL, fakeFacts{clusters: fleet})
	now := time.Now()
	p.now = func() time.Time { return now }
	p.Score(context.Background(), binding("1"), fleet[0])
	now = now.Add(2 * time.Minute)
	p.Score(context.Background(), binding("1"), fleet[0])
	if n := api.requests.Load(); n != 2 {
		t.Fatalf("API requests = %d, want 2 after the TTL", n)
	}
}

func TestScoreIsClampedToKarmadaRange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"scores":[{"name":"green","score":250}]}`))
	}))
	defer srv.Close()
	p := newPlugin(t, srv.URL, nil)
	if score, _ := p.Score(context.Background(), binding("1"), fleet[0]); score != framework.MaxClusterScore {
		t.Fatalf("score = %d, want %d", score, framework.MaxClusterScore)
	}
}

func TestTLSWithCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"clusters":["green"],"filtered":[]}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pemOf(srv), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(srv.URL, TLSFiles{CA: ca}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Filter(context.Background(), &Request{Clusters: []ClusterFacts{{Name: "green"}}})
	if err != nil || len(resp.Clusters) != 1 {
		t.Fatalf("filter over TLS: %v %+v", err, resp)
	}
	if _, err := NewClient(srv.URL, TLSFiles{CA: filepath.Join(t.TempDir(), "missing")}, time.Second); err == nil {
		t.Fatal("a missing CA file must be an error")
	}
}

func TestFactsOfUsesGridZoneLabelAndLegacyZone(t *testing.T) {
	c := cluster("x", "gcp", "europe-west9")
	c.Labels = map[string]string{GridZoneLabel: "FR"}
	c.Spec.Zone = "europe-west9-a" //nolint:staticcheck // deprecated field, still honoured
	f := FactsOf(c)
	if f.Zone != "FR" || len(f.Zones) != 1 || f.Zones[0] != "europe-west9-a" {
		t.Fatalf("facts = %+v", f)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{"CARBONSHIFT_URL": "https://x:8443", "CARBONSHIFT_TIMEOUT": "250ms"}
	opts, err := OptionsFromEnv(func(k string) string { return env[k] })
	if err != nil || opts.URL != "https://x:8443" || opts.Timeout != 250*time.Millisecond ||
		opts.CacheTTL != DefaultCacheTTL {
		t.Fatalf("opts = %+v, err = %v", opts, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	env["CARBONSHIFT_TIMEOUT"] = "soon"
	if _, err := OptionsFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("a bad duration must be an error")
	}
	if err := (&Options{Timeout: time.Second, CacheTTL: time.Second}).Validate(); err == nil {
		t.Fatal("a missing URL must be an error")
	}
}

func pemOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// BenchmarkFilterAndScoreAThousandClusters is one scheduling cycle of a binding over 1,000
// clusters: 1,000 Filter and 1,000 Score calls, the answers already cached.
func BenchmarkFilterAndScoreAThousandClusters(b *testing.B) {
	api := newFakeAPI(&testing.T{}, 0)
	defer api.server.Close()
	clusters := make([]*clusterv1alpha1.Cluster, 1000)
	for i := range clusters {
		clusters[i] = cluster("c"+strconv.Itoa(i), "aws", "eu-west-3")
	}
	p, err := New(Options{URL: api.server.URL, Timeout: time.Second, CacheTTL: time.Hour},
		fakeFacts{clusters: clusters})
	if err != nil {
		b.Fatal(err)
	}
	spec := binding("1")
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		for _, c := range clusters {
			p.Filter(ctx, spec, nil, c)
			p.Score(ctx, spec, c)
		}
	}
}

func TestFailedCallsAreCountedAndLoggedAtMostOncePerInterval(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error": "boom"}`, http.StatusBadRequest)
	}))
	defer down.Close()
	p := newPlugin(t, down.URL, fakeFacts{clusters: fleet})
	now := time.Now()
	p.now = func() time.Time { return now }
	before := testutil.ToFloat64(apiCalls.WithLabelValues("filter", "error"))
	for i := range 3 {
		p.Filter(context.Background(), binding(strconv.Itoa(i)), nil, fleet[0])
		now = now.Add(p.failTTL + time.Second) // past the cached failure, within logEvery
	}
	if p.Failures() != 3 {
		t.Fatalf("Failures() = %d, want 3: every failed call counts", p.Failures())
	}
	if got := testutil.ToFloat64(apiCalls.WithLabelValues("filter", "error")) - before; got != 3 {
		t.Fatalf("carbonshift_plugin_api_calls_total{filter,error} rose by %v, want 3", got)
	}
	// The first failure was logged; the next two fell in the same interval.
	if ok, _ := p.failLog.allow(now); ok {
		t.Fatal("a fourth log line within the interval should be held back")
	}
	if ok, dropped := p.failLog.allow(now.Add(logEvery)); !ok || dropped != 3 {
		t.Fatalf("after the interval: allow = %v with %d held back, want true and 3", ok, dropped)
	}
}

func TestWarningsInAnswersAreCountedAndTheAnswerIsUsed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"clusters":["green"],"filtered":[{"name":"dirty","reason":"r"}],` +
			`"warnings":["workload.annotations.carbonshift.io/max-intensity: bad; ignored"]}`))
	}))
	defer srv.Close()
	p := newPlugin(t, srv.URL, fakeFacts{clusters: fleet})
	before := testutil.ToFloat64(apiWarnings.WithLabelValues("filter"))
	if res := p.Filter(context.Background(), binding("1"), nil, cluster("dirty", "", "")); res.IsSuccess() {
		t.Fatal("the answer's filtered cluster should stay filtered despite the warning")
	}
	if got := testutil.ToFloat64(apiWarnings.WithLabelValues("filter")) - before; got != 1 {
		t.Fatalf("carbonshift_plugin_api_warnings_total{filter} rose by %v, want 1", got)
	}
	if p.Failures() != 0 {
		t.Fatalf("an answer with warnings is not a failure, got %d", p.Failures())
	}
}
