package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/devloop-dev/devloop/internal/ui"
)

// dashboard is a running `kubectl devloop ui` and a client that opened
// its URL as the page does: it traded the one-time code for a page token
// and sends it as the header on every request.
type dashboard struct {
	base   string // http://127.0.0.1:PORT
	code   string // the printed URL's one-time code (spent)
	token  string // the page token it was traded for
	client *http.Client
}

// tokenTransport adds the page token to every request.
type tokenTransport struct{ token string }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	// A test may send a request with an empty or wrong token on purpose.
	if _, set := r.Header[ui.TokenHeader]; !set {
		r.Header.Set(ui.TokenHeader, tt.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// exchange trades a one-time code for a page token as the page does.
func exchange(base, code string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/session", nil)
	req.Header.Set(ui.CodeHeader, code)
	return http.DefaultClient.Do(req)
}

var dashboardURL = regexp.MustCompile(`devloop dashboard: (http://127\.0\.0\.1:\d+)/\?(?:token|code)=([0-9a-f]+)`)

// launchDashboard runs `kubectl devloop ui --no-open --port 0 ARGS` in
// the background and returns the URL it printed, not yet opened: for a
// browser to open.
func launchDashboard(t *testing.T, opts Options, args ...string) (base, url string) {
	t.Helper()
	return launchDashboardFor(t, time.Minute, opts, args...)
}

// launchDashboardFor is launchDashboard whose plugin runs for at most
// within: for a test that waits on the operator.
func launchDashboardFor(t *testing.T, within time.Duration, opts Options, args ...string) (base, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	startPlugin(ctx, nil, out, errOut, opts, append([]string{"ui", "--no-open", "--port", "0"}, args...)...)
	var m []string
	waitUntil(t, "the dashboard's URL (stderr so far: "+errOut.String()+")", func() bool {
		m = dashboardURL.FindStringSubmatch(out.String())
		return m != nil
	})
	return m[1], strings.TrimPrefix(m[0], "devloop dashboard: ")
}

// startDashboard runs `kubectl devloop ui --no-open --port 0 ARGS` in the
// background and opens its URL.
func startDashboard(t *testing.T, opts Options, args ...string) *dashboard {
	t.Helper()
	out, errOut, _ := pluginInBackground(t, opts, append([]string{"ui", "--no-open", "--port", "0"}, args...)...)
	return openDashboard(t, out, errOut)
}

// stoppableDashboard is startDashboard whose plugin stops when ctx ends
// (Ctrl-C); wait returns its exit code.
func stoppableDashboard(t *testing.T, ctx context.Context, opts Options, args ...string) (d *dashboard, wait func() int) {
	t.Helper()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	wait = startPlugin(ctx, nil, out, errOut, opts, append([]string{"ui", "--no-open", "--port", "0"}, args...)...)
	return openDashboard(t, out, errOut), wait
}

// openDashboard opens the URL the plugin printed to out.
func openDashboard(t *testing.T, out, errOut *syncBuffer) *dashboard {
	t.Helper()
	var m []string
	waitUntil(t, "the dashboard's URL (stderr so far: "+errOut.String()+")", func() bool {
		m = dashboardURL.FindStringSubmatch(out.String())
		return m != nil
	})
	d := &dashboard{base: m[1], code: m[2]}
	resp, err := exchange(d.base, d.code)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("trading the URL's code for a token: %s %v", resp.Status, err)
	}
	d.token = s.Token
	d.client = &http.Client{Transport: tokenTransport{d.token}, Timeout: 30 * time.Second}
	return d
}

func (d *dashboard) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := d.client.Get(d.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// post sends an action as the page does, with extra headers on top.
func (d *dashboard) post(t *testing.T, path, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", d.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		if v == "" && k != ui.TokenHeader {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		sb.WriteString(sc.Text())
	}
	return resp.StatusCode, sb.String()
}

// sse is one server-sent event.
type sse struct {
	event string
	data  string
}

// readEvents reads path's server-sent events until until says stop, or
// fails the test after a minute.
func (d *dashboard) readEvents(t *testing.T, path string, until func(sse) bool) []sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+path, nil)
	client := &http.Client{Transport: d.client.Transport}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	var got []sse
	var cur sse
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.event != "":
			got = append(got, cur)
			if until(cur) {
				return got
			}
			cur = sse{}
		}
	}
	t.Fatalf("GET %s ended (%v) before the awaited event; read %d events", path, sc.Err(), len(got))
	return nil
}

// update decodes a stream event's update.
func uiUpdate(e sse) ui.Update {
	var u ui.Update
	if e.event == "update" {
		_ = json.Unmarshal([]byte(e.data), &u)
	}
	return u
}

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func genericIOStreams(out *syncBuffer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{Out: out, ErrOut: &syncBuffer{}}
}
