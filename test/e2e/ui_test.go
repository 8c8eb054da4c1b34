//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/ui"
)

// TestUI: the sample environment on the real cluster, seen through
// `kubectl devloop ui` as the page sees it (its stream and its logs
// endpoint, with the token cookie): Ready, then the web image's real build
// log (the builder Job's pod) and the web pod's log stream in, read through
// the API server's pods/log.
func TestUI(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	ns := namespace(t, "e2e-ui")
	env := sampleIn(t, ns)
	pushDir(t, env, copyDir(t, c.SampleDir()))
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())

	out := &lockedBuffer{}
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}
		cli.Run(ctx, []string{"--kubeconfig", c.Kubeconfig, "-n", ns, "ui", "--no-open"}, streams, cli.Options{})
	}()
	urlRE := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]+)`)
	var m []string
	g.Eventually(func() []string { m = urlRE.FindStringSubmatch(out.String()); return m }, time.Minute, 50*time.Millisecond).ShouldNot(BeNil(), "the dashboard's URL")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(m[1] + "/?token=" + m[2])
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

	// The page's stream shows the environment Ready.
	start := time.Now()
	key := ns + "/" + env.Name
	readSSE(t, ctx, browser, m[1]+"/api/stream", func(event, data string) bool {
		var u ui.Update
		if event != "update" || json.Unmarshal([]byte(data), &u) != nil || u.Kind != "env" || u.Key != key {
			return false
		}
		var v ui.EnvView
		_ = json.Unmarshal(u.Data, &v)
		t.Logf("page: %s %s %q", key, v.State, v.Message)
		return v.State == "Ready"
	})
	t.Logf("Ready on the page %s after apply", time.Since(start).Round(time.Second))

	logs := func(kind, name string, follow bool) []ui.LogLine {
		q := url.Values{"namespace": {ns}, "env": {env.Name}, "kind": {kind}, "name": {name}}
		if follow {
			q.Set("follow", "1")
		}
		var lines []ui.LogLine
		readSSE(t, ctx, browser, m[1]+"/api/logs?"+q.Encode(), func(event, data string) bool {
			switch event {
			case "lines":
				var more []ui.LogLine
				_ = json.Unmarshal([]byte(data), &more)
				lines = append(lines, more...)
				return follow
			case "end":
				t.Logf("%s %s log ended: %s", kind, name, data)
				return true
			}
			return false
		})
		return lines
	}
	build := logs("build", "web/web", false)
	g.Expect(build).NotTo(BeEmpty(), "the web image's build log")
	t.Logf("build log of web/web: %d lines, first %q", len(build), build[0].Text)
	pod := logs("component", "web", true)
	g.Expect(pod).NotTo(BeEmpty(), "the web pod's log")
	t.Logf("pod log of web: first %q from %q", pod[0].Text, pod[0].Stream)
}

// readSSE reads server-sent events until done says so or ctx ends.
func readSSE(t *testing.T, ctx context.Context, c *http.Client, u string, done func(event, data string) bool) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if done(event, strings.TrimPrefix(line, "data: ")) {
				return
			}
		}
	}
	t.Fatalf("GET %s ended before what was awaited: %v", u, sc.Err())
}
