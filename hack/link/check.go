package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"time"
)

// linkFigures is what a check measured of the link, from the laptop's
// side, against the cluster's registry through the link.
type linkFigures struct {
	rtt          time.Duration // median of requests on a kept-alive connection
	upMbit       float64       // a blob uploaded
	downMbit     float64       // the same blob read back
	sampleBytes  int
	rttSamples   int
	registryHost string
}

func (f linkFigures) String() string {
	return fmt.Sprintf("link to %s: round trip %s (median of %d), up %.1f Mbit/s, down %.1f Mbit/s (%d MiB each way)",
		f.registryHost, f.rtt.Round(100*time.Microsecond), f.rttSamples, f.upMbit, f.downMbit, f.sampleBytes>>20)
}

// measureLink times requests to the registry at host (plain HTTP): the
// round trip of a small request on a connection already open, then one
// blob of size bytes pushed and pulled, in repository repo.
func measureLink(ctx context.Context, host, repo string, size int) (linkFigures, error) {
	f := linkFigures{registryHost: host, sampleBytes: size, rttSamples: 15}
	client := &http.Client{Timeout: 5 * time.Minute}
	base := "http://" + host
	get := func(url string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	// The first request opens the connection; the rest reuse it, so each
	// is one round trip plus the registry's own time.
	var rtts []time.Duration
	for i := 0; i <= f.rttSamples; i++ {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, base+"/v2/", nil)
		if err != nil {
			return f, err
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return f, fmt.Errorf("GET %s/v2/: %w", base, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i > 0 && reused {
			rtts = append(rtts, time.Since(start))
		}
	}
	if len(rtts) == 0 {
		return f, fmt.Errorf("no request to %s reused its connection", host)
	}
	slices.Sort(rtts)
	f.rtt = rtts[len(rtts)/2]
	f.rttSamples = len(rtts)

	blob := make([]byte, size)
	if _, err := rand.Read(blob); err != nil {
		return f, err
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(blob))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/"+repo+"/blobs/uploads/", nil)
	if err != nil {
		return f, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return f, err
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || loc == "" {
		return f, fmt.Errorf("starting an upload to %s: %s", repo, resp.Status)
	}
	if loc[0] == '/' {
		loc = base + loc
	}
	sep := "?"
	if bytes.ContainsRune([]byte(loc), '?') {
		sep = "&"
	}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, loc+sep+"digest="+digest, bytes.NewReader(blob))
	if err != nil {
		return f, err
	}
	put.ContentLength = int64(size)
	put.Header.Set("Content-Type", "application/octet-stream")
	start := time.Now()
	resp, err = client.Do(put)
	if err != nil {
		return f, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return f, fmt.Errorf("uploading a blob to %s: %s", repo, resp.Status)
	}
	f.upMbit = mbit(size, time.Since(start))

	start = time.Now()
	resp, err = get(base + "/v2/" + repo + "/blobs/" + digest)
	if err != nil {
		return f, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != int64(size) {
		return f, fmt.Errorf("reading the blob back: %d bytes, %v", n, err)
	}
	f.downMbit = mbit(size, time.Since(start))
	return f, nil
}

func mbit(bytes int, d time.Duration) float64 {
	return float64(bytes) * 8 / 1e6 / d.Seconds()
}
