package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// failing answers requests that match with status and a registry error
// body, and passes the others to the registry.
func failing(match func(*http.Request) bool, status int, code string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !match(r) {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			if r.Method != http.MethodHead {
				fmt.Fprintf(w, `{"errors":[{"code":%q,"message":"the registry says no"}]}`, code)
			}
		})
	}
}

func anyRequest(r *http.Request) bool { return r.URL.Path != "/v2/" }

func isWrite(r *http.Request) bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch
}

func isManifestPutByDigest(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256:")
}

func isBlobUpload(r *http.Request) bool {
	return isWrite(r) && strings.Contains(r.URL.Path, "/blobs/uploads/")
}

func TestBuildFaults(t *testing.T) {
	tests := []struct {
		name string
		wrap func(http.Handler) http.Handler
		// base names a base image in the registry ("" for scratch).
		base      string
		from      string
		platforms []string
		timeout   time.Duration
		isFault   func(error) bool
		want      []string
	}{{
		name:    "5xx",
		wrap:    failing(anyRequest, http.StatusServiceUnavailable, "UNAVAILABLE"),
		isFault: fault.IsUnavailable,
		want:    []string{"registry unavailable for HOST/team/app"},
	}, {
		name:    "5xx on upload",
		wrap:    failing(isBlobUpload, http.StatusBadGateway, "UNKNOWN"),
		isFault: fault.IsUnavailable,
		want:    []string{"registry unavailable for HOST/team/app"},
	}, {
		name:    "403 on push",
		wrap:    failing(isWrite, http.StatusForbidden, "DENIED"),
		isFault: fault.IsPermanent,
		want:    []string{"push access denied to HOST/team/app: check credentialsRef: DENIED: the registry says no"},
	}, {
		name:    "401 on push",
		wrap:    failing(isWrite, http.StatusUnauthorized, "UNAUTHORIZED"),
		isFault: fault.IsPermanent,
		want:    []string{"push access denied to HOST/team/app: check credentialsRef: UNAUTHORIZED: the registry says no"},
	}, {
		name:    "403 on read of the target",
		wrap:    failing(func(r *http.Request) bool { return r.Method == http.MethodHead }, http.StatusForbidden, "DENIED"),
		isFault: fault.IsPermanent,
		want:    []string{"push access denied to HOST/team/app: check credentialsRef: 403 Forbidden"},
	}, {
		name:    "unknown base",
		base:    "HOST/base/nope:1.0",
		isFault: fault.IsPermanent,
		want:    []string{"image app", "base image HOST/base/nope:1.0 not found"},
	}, {
		name:      "base lacks the platform",
		base:      "HOST/base/static:latest",
		platforms: []string{"linux/s390x"},
		isFault:   fault.IsPermanent,
		want:      []string{"image app", "base image HOST/base/static:latest", "linux/s390x"},
	}, {
		name:      "base index lacks the platform",
		base:      "HOST/base/multi:latest",
		platforms: []string{"linux/amd64", "linux/riscv64"},
		isFault:   fault.IsPermanent,
		want:      []string{"image app", "base image HOST/base/multi:latest has no linux/riscv64 manifest (it has linux/amd64, linux/arm64)"},
	}, {
		name:    "missing layer source",
		from:    "out/manager",
		isFault: fault.IsPermanent,
		want:    []string{"image app", `"out/manager"`},
	}, {
		name: "timeout",
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
					return
				}
				next.ServeHTTP(w, r)
			})
		},
		timeout: 300 * time.Millisecond,
		isFault: fault.IsUnavailable,
		want:    []string{"registry unavailable for HOST/team/app"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			host := startRegistry(t, tc.wrap)
			if strings.Contains(tc.base, "/base/static") {
				pushBase(t, host, "base/static", "linux/amd64")
			}
			if strings.Contains(tc.base, "/base/multi") {
				pushBase(t, host, "base/multi", "linux/amd64", "linux/arm64")
			}
			b, _ := testBuilder(t, host)
			dir := testfiles.Tree(t, map[string]string{"a": "a"})
			img := Spec{Name: "app", Base: strings.ReplaceAll(tc.base, "HOST", host), Platforms: tc.platforms,
				Layers: []v1alpha1.LayerMapping{{From: "a", To: "/a"}}}
			if tc.from != "" {
				img.Layers = []v1alpha1.LayerMapping{{From: tc.from, To: "/x"}}
			}
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}

			_, err := b.Build(ctx, img, dir, nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(tc.isFault(err)).To(BeTrue(), "wrong fault kind: %v", err)
			t.Log(err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(strings.ReplaceAll(w, "HOST", host)))
			}
		})
	}
}

func TestRegistryDownIsUnavailable(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()

	for _, insecure := range []bool{true, false} {
		t.Run(fmt.Sprintf("insecure=%v", insecure), func(t *testing.T) {
			g := NewWithT(t)
			b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: insecure}, fastRetries())
			g.Expect(err).NotTo(HaveOccurred())
			_, err = b.Build(context.Background(), Spec{Name: "app"}, "", nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(fault.IsUnavailable(err)).To(BeTrue(), err.Error())
			g.Expect(err.Error()).To(ContainSubstring("registry unavailable for " + host + "/team/app"))

			_, err = b.ResolveBase(context.Background(), host+"/base/static:latest", false)
			g.Expect(fault.IsUnavailable(err)).To(BeTrue(), "%v", err)
		})
	}
}

// TestFailedPushMovesNoTag: a push that fails midway (a blob, or the
// manifest) leaves every tag where it was.
func TestFailedPushMovesNoTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*http.Request) bool
	}{
		{"blob upload fails", isBlobUpload},
		{"manifest put fails", isManifestPutByDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var broken bool
			host := startRegistry(t, func(next http.Handler) http.Handler {
				return failing(func(r *http.Request) bool { return broken && tc.fail(r) }, http.StatusServiceUnavailable, "UNAVAILABLE")(next)
			})
			b, rt := testBuilder(t, host)
			dir := testfiles.Tree(t, map[string]string{"a": "v1"})
			img := Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "a", To: "/a"}}}

			first, err := b.Build(context.Background(), img, dir, staticTags("latest"))
			g.Expect(err).NotTo(HaveOccurred())

			broken = true
			testfiles.WriteFile(t, dir, "a", "v2")
			rt.take()
			_, err = b.Build(context.Background(), img, dir, staticTags("latest"))
			g.Expect(err).To(HaveOccurred())
			g.Expect(fault.IsUnavailable(err)).To(BeTrue(), err.Error())

			g.Expect(tagDigest(t, host, "team/app", "latest")).To(Equal(first.Digest))
			for _, ref := range manifestPuts(rt.take()) {
				g.Expect(ref).To(HavePrefix("sha256:"), "a tag was written")
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want failure
	}{
		{"canceled", context.Canceled, failureOther},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), failureUnavailable},
		{"plain http", &PlainHTTPError{Host: "h"}, failurePlainHTTP},
		{"other", errors.New("boom"), failureOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(classify(tc.err)).To(Equal(tc.want))
		})
	}
}
