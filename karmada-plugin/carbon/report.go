package carbon

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// logEvery is the shortest pause between two log lines about failed calls (or about
// warnings in carbonshift's answers); the calls in between are counted, not logged.
const logEvery = 30 * time.Second

// apiCalls counts the plugin's calls to carbonshift by operation (filter, score) and
// result (ok, error), on the registry karmada-scheduler serves at --metrics-bind-address.
// A failed call lets every cluster through with the neutral score, so a rising error
// count means carbon filtering is off.
var apiCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "carbonshift_plugin_api_calls_total",
	Help: "Calls of the CarbonAware plugin to the carbonshift scheduler API, by operation and result (error: every cluster passed with the neutral score).",
}, []string{"operation", "result"})

// apiWarnings counts warnings in carbonshift's answers (e.g. a malformed carbonshift.io/
// annotation on a workload, ignored by carbonshift), by operation.
var apiWarnings = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "carbonshift_plugin_api_warnings_total",
	Help: "Warnings in carbonshift's answers to the CarbonAware plugin (e.g. an ignored malformed carbonshift.io/ annotation), by operation.",
}, []string{"operation"})

func init() {
	ctrlmetrics.Registry.MustRegister(apiCalls, apiWarnings)
}

// limiter lets one report through per interval and counts the ones it holds back.
type limiter struct {
	mu      sync.Mutex
	every   time.Duration
	last    time.Time
	dropped int64
}

// allow reports whether to log now and how many reports were held back since the last.
func (l *limiter) allow(now time.Time) (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		return false, 0
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	return true, dropped
}

// reportFailure counts a failed call and logs it, at most once per logEvery.
func (p *Plugin) reportFailure(op string, err error) {
	apiCalls.WithLabelValues(op, "error").Inc()
	p.failures.Add(1)
	p.failing.Store(true)
	if ok, dropped := p.failLog.allow(p.now()); ok {
		klog.ErrorS(err, "carbonshift API call failed: clusters pass with a neutral score (carbon filtering is off for this binding)",
			"plugin", Name, "operation", op, "failedCalls", p.failures.Load(), "unloggedSinceLast", dropped)
	}
}

// reportSuccess counts a call that was answered and logs carbonshift's warnings (rate
// limited); the first success after failures is logged too.
func (p *Plugin) reportSuccess(op string, warnings []string) {
	apiCalls.WithLabelValues(op, "ok").Inc()
	if p.failing.CompareAndSwap(true, false) {
		klog.InfoS("carbonshift API answers again", "plugin", Name, "failedCalls", p.failures.Load())
	}
	if len(warnings) == 0 {
		return
	}
	apiWarnings.WithLabelValues(op).Add(float64(len(warnings)))
	if ok, dropped := p.warnLog.allow(p.now()); ok {
		klog.InfoS("carbonshift answered with warnings", "plugin", Name, "operation", op,
			"warnings", warnings, "unloggedSinceLast", dropped)
	}
}

// Failures reports how many API calls failed (each let every cluster through).
func (p *Plugin) Failures() int64 { return p.failures.Load() }
