package carbon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// ClusterFacts is one candidate cluster as the carbonshift API reads it.
type ClusterFacts struct {
	Name     string            `json:"name"`
	Zone     string            `json:"zone,omitempty"`
	Provider string            `json:"provider,omitempty"`
	Region   string            `json:"region,omitempty"`
	Zones    []string          `json:"zones,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// WorkloadFacts describes the workload being placed (all fields optional).
type WorkloadFacts struct {
	Namespace   string            `json:"namespace,omitempty"`
	Name        string            `json:"name,omitempty"`
	Kind        string            `json:"kind,omitempty"`
	Replicas    int32             `json:"replicas,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Request is the body of POST /v1/karmada/filter and /v1/karmada/score.
type Request struct {
	Clusters []ClusterFacts `json:"clusters"`
	Workload *WorkloadFacts `json:"workload,omitempty"`
}

// Filtered is one cluster the filter removed, with the reason.
type Filtered struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// FilterResponse is the answer of POST /v1/karmada/filter.
type FilterResponse struct {
	Clusters []string   `json:"clusters"`
	Filtered []Filtered `json:"filtered"`
	// Warnings name what carbonshift ignored or relaxed (e.g. a malformed annotation).
	Warnings []string `json:"warnings,omitempty"`
}

// ClusterScore is one entry of a score answer.
type ClusterScore struct {
	Name           string   `json:"name"`
	Score          int64    `json:"score"`
	Intensity      *float64 `json:"intensity"`
	Zone           *string  `json:"zone"`
	Source         *string  `json:"source"`
	DataAgeSeconds *float64 `json:"dataAgeSeconds"`
	Reason         string   `json:"reason,omitempty"`
}

// ScoreResponse is the answer of POST /v1/karmada/score.
type ScoreResponse struct {
	Scores []ClusterScore `json:"scores"`
	// Warnings name what carbonshift ignored (e.g. a malformed annotation).
	Warnings []string `json:"warnings,omitempty"`
}

// maxResponseBytes bounds what the client reads from the server (1000 clusters fit easily).
const maxResponseBytes = 8 << 20

// Client calls the carbonshift scheduler API over HTTPS (or HTTP for local tests).
type Client struct {
	base string
	http *http.Client
}

// TLSFiles are the PEM files of the client side of TLS; empty fields are not used.
type TLSFiles struct {
	// CA replaces the system roots for the server certificate.
	CA string
	// Cert and Key are the client certificate presented to carbonshift (required by its
	// service.client_ca); both or neither. They are read again for every new connection,
	// so a rotated Secret is used without a restart.
	Cert, Key string
}

// NewClient builds a client for the API at baseURL with the TLS files; timeout bounds
// every request end to end.
func NewClient(baseURL string, files TLSFiles, timeout time.Duration) (*Client, error) {
	if baseURL == "" {
		return nil, fmt.Errorf("no carbonshift URL (set --carbonshift-url or CARBONSHIFT_URL)")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 4
	config, err := files.config()
	if err != nil {
		return nil, err
	}
	transport.TLSClientConfig = config
	return &Client{
		base: strings.TrimRight(baseURL, "/"),
		http: &http.Client{Transport: transport, Timeout: timeout},
	}, nil
}

func (f TLSFiles) config() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no PEM certificate in %s", f.CA)
		}
		config.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("a client certificate needs both --carbonshift-cert-file and --carbonshift-key-file")
	}
	if f.Cert != "" {
		if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				return nil, fmt.Errorf("load client certificate: %w", err)
			}
			return &pair, nil
		}
	}
	return config, nil
}

// Filter asks which clusters stay for the workload.
func (c *Client) Filter(ctx context.Context, req *Request) (*FilterResponse, error) {
	out := &FilterResponse{}
	if err := c.post(ctx, "/v1/karmada/filter", req, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Score asks for a 0..100 greenness score per cluster.
func (c *Client) Score(ctx context.Context, req *Request) (*ScoreResponse, error) {
	out := &ScoreResponse{}
	if err := c.post(ctx, "/v1/karmada/score", req, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, errorText(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("POST %s: bad answer: %w", path, err)
	}
	return nil
}

// ErrorAnswer is the body of every carbonshift error answer: {"error": "<field>: <problem>"}.
type ErrorAnswer struct {
	Error string `json:"error"`
}

// errorText is the message of an error answer, or the body as sent when it is not one.
func errorText(data []byte) string {
	var answer ErrorAnswer
	if err := json.Unmarshal(data, &answer); err == nil && answer.Error != "" {
		return answer.Error
	}
	return string(bytes.TrimSpace(data))
}
