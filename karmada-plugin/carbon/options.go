package carbon

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Defaults for the plugin settings.
const (
	DefaultTimeout  = 500 * time.Millisecond
	DefaultCacheTTL = 30 * time.Second
)

// Options say where carbonshift is and how long to wait for it. Each setting comes from
// a flag, else from an environment variable, else from the default.
type Options struct {
	// URL of the carbonshift server, e.g. https://carbonshift.carbonshift-system.svc:443
	// (the port of the Service, manifests/base/service.yaml)
	// (CARBONSHIFT_URL).
	URL string
	// CAFile is a PEM bundle to trust for the server certificate (CARBONSHIFT_CA_FILE);
	// empty means the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and key presented to carbonshift
	// (CARBONSHIFT_CERT_FILE, CARBONSHIFT_KEY_FILE), for a carbonshift that requires one.
	CertFile, KeyFile string
	// Timeout bounds one API request end to end (CARBONSHIFT_TIMEOUT, default 500ms).
	Timeout time.Duration
	// CacheTTL is how long one binding revision's answer is reused (CARBONSHIFT_CACHE_TTL).
	CacheTTL time.Duration
	// Settle is how long the scheduler's own assignments count against a cluster's room
	// before its resource summary shows them (CARBONSHIFT_SETTLE, default 15s; 0 leaves
	// karmada-scheduler's estimators as they are). See SettlingEstimator.
	Settle time.Duration
}

// OptionsFromEnv reads the environment (getenv is os.Getenv in production).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	opts := Options{
		URL:      getenv("CARBONSHIFT_URL"),
		CAFile:   getenv("CARBONSHIFT_CA_FILE"),
		CertFile: getenv("CARBONSHIFT_CERT_FILE"),
		KeyFile:  getenv("CARBONSHIFT_KEY_FILE"),
		Timeout:  DefaultTimeout,
		CacheTTL: DefaultCacheTTL,
		Settle:   DefaultSettle,
	}
	if raw := getenv("CARBONSHIFT_SETTLE"); raw != "" {
		v, err := time.ParseDuration(raw)
		if err != nil || v < 0 {
			return opts, fmt.Errorf("CARBONSHIFT_SETTLE must be a duration >= 0 such as 15s, got %q", raw)
		}
		opts.Settle = v
	}
	for _, d := range []struct {
		env string
		out *time.Duration
	}{{"CARBONSHIFT_TIMEOUT", &opts.Timeout}, {"CARBONSHIFT_CACHE_TTL", &opts.CacheTTL}} {
		if raw := getenv(d.env); raw != "" {
			v, err := time.ParseDuration(raw)
			if err != nil || v <= 0 {
				return opts, fmt.Errorf("%s must be a positive duration such as 500ms, got %q", d.env, raw)
			}
			*d.out = v
		}
	}
	return opts, nil
}

// AddFlags registers --carbonshift-url, --carbonshift-ca-file, --carbonshift-cert-file,
// --carbonshift-key-file, --carbonshift-timeout and --carbonshift-cache-ttl; the current
// values (from the environment) are the defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "carbonshift-url", o.URL,
		"Base URL of the carbonshift scheduler API (env CARBONSHIFT_URL).")
	fs.StringVar(&o.CAFile, "carbonshift-ca-file", o.CAFile,
		"PEM CA bundle that signed the carbonshift serving certificate (env CARBONSHIFT_CA_FILE).")
	fs.StringVar(&o.CertFile, "carbonshift-cert-file", o.CertFile,
		"PEM client certificate presented to carbonshift, for a carbonshift with service.client_ca (env CARBONSHIFT_CERT_FILE).")
	fs.StringVar(&o.KeyFile, "carbonshift-key-file", o.KeyFile,
		"PEM key of --carbonshift-cert-file (env CARBONSHIFT_KEY_FILE).")
	fs.DurationVar(&o.Timeout, "carbonshift-timeout", o.Timeout,
		"Deadline of one carbonshift request; on expiry clusters pass with a neutral score (env CARBONSHIFT_TIMEOUT).")
	fs.DurationVar(&o.Settle, "carbonshift-settle", o.Settle,
		"how long the scheduler's own assignments count against a cluster's room before its resource summary shows them (0: off)")
	fs.DurationVar(&o.CacheTTL, "carbonshift-cache-ttl", o.CacheTTL,
		"How long one binding revision's answer is reused (env CARBONSHIFT_CACHE_TTL).")
}

// Validate checks the settings before the plugin starts.
func (o *Options) Validate() error {
	if o.URL == "" {
		return fmt.Errorf("plugin %s needs --carbonshift-url or CARBONSHIFT_URL", Name)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return fmt.Errorf("--carbonshift-cert-file and --carbonshift-key-file go together")
	}
	if o.Timeout <= 0 || o.CacheTTL <= 0 {
		return fmt.Errorf("--carbonshift-timeout and --carbonshift-cache-ttl must be positive")
	}
	return nil
}
