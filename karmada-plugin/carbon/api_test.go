package carbon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestErrorAnswersAreReportedByTheirMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"clusters[0].name: expected str of length >= 1"}`))
	}))
	defer srv.Close()
	client, err := NewClient(srv.URL, TLSFiles{}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Score(context.Background(), &Request{Clusters: []ClusterFacts{{Name: ""}}})
	if err == nil || !strings.HasSuffix(err.Error(), "HTTP 400: clusters[0].name: expected str of length >= 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestBodiesThatAreNotErrorAnswersAreReportedAsSent(t *testing.T) {
	if got := errorText([]byte(" plain text \n")); got != "plain text" {
		t.Fatalf("errorText = %q", got)
	}
}
