package source

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// gitRepo is a test repository:
//
//	c0 "zero"          no ref points here
//	c1 "one"           tag v1 (lightweight)
//	c2 "two"           branch dev, tag v2 (annotated)
//	c3 "one" again     branch master (HEAD); same tree as c1
type gitRepo struct {
	dir            string
	url            string
	c0, c1, c2, c3 string
}

// needGit skips when the git binary is absent: go-git's file:// transport
// runs git-upload-pack, and the HTTP tests run git http-backend.
func needGit(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed (apt-get install -y git): the file:// and HTTP git tests need git-upload-pack and git http-backend")
	}
	return p
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1700000000, 0)}
	commit := func(msg, body string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a.txt", filepath.Join(dir, "bin/link")); err != nil {
		t.Fatal(err)
	}
	r := &gitRepo{dir: dir, url: "file://" + dir}
	r.c0 = commit("zero", "zero")
	r.c1 = commit("one", "one")
	if _, err := repo.CreateTag("v1", plumbing.NewHash(r.c1), nil); err != nil {
		t.Fatal(err)
	}
	r.c2 = commit("two", "two")
	if _, err := repo.CreateTag("v2", plumbing.NewHash(r.c2), &git.CreateTagOptions{Tagger: sig, Message: "v2"}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/dev", plumbing.NewHash(r.c2))); err != nil {
		t.Fatal(err)
	}
	r.c3 = commit("one again", "one")
	return r
}

func gitSource(url string, ref *v1alpha1.GitRef) v1alpha1.Source {
	return v1alpha1.Source{Name: "app", Git: &v1alpha1.GitSource{URL: url, Ref: ref}}
}

func TestGitResolve(t *testing.T) {
	r := newGitRepo(t)
	tests := []struct {
		name       string
		url        string
		ref        *v1alpha1.GitRef
		revision   string
		commit     string
		class      errorClass
		errorParts []string
	}{
		{name: "default branch", ref: nil, revision: "master@sha1:" + r.c3, commit: r.c3},
		{name: "branch", ref: &v1alpha1.GitRef{Branch: "dev"}, revision: "dev@sha1:" + r.c2, commit: r.c2},
		{name: "lightweight tag", ref: &v1alpha1.GitRef{Tag: "v1"}, revision: "v1@sha1:" + r.c1, commit: r.c1},
		{name: "annotated tag resolves to its commit", ref: &v1alpha1.GitRef{Tag: "v2"}, revision: "v2@sha1:" + r.c2, commit: r.c2},
		{name: "commit resolves to itself without network", url: "file:///nonexistent/repo", ref: &v1alpha1.GitRef{Commit: r.c0}, revision: "sha1:" + r.c0, commit: r.c0},
		{name: "unknown branch", ref: &v1alpha1.GitRef{Branch: "nope"}, class: permanent,
			errorParts: []string{`source "app": git file://`, `branch "nope" not found`}},
		{name: "unknown tag", ref: &v1alpha1.GitRef{Tag: "v9"}, class: permanent,
			errorParts: []string{`source "app": git file://`, `tag "v9" not found`}},
		{name: "unsupported scheme", url: "ftp://example.com/x.git", class: permanent, errorParts: []string{"unsupported URL scheme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := tt.url
			if url == "" {
				url = r.url
			}
			ref, err := newFetcher(t).Resolve(context.Background(), testNamespace, gitSource(url, tt.ref))
			want := Ref{Source: "app", Kind: KindGit, URL: url, Revision: tt.revision, ID: tt.commit, Commit: tt.commit}
			expectResolved(t, ref, err, tt.class, tt.errorParts, want)
		})
	}
}

func TestGitFetch(t *testing.T) {
	r := newGitRepo(t)
	f := newFetcher(t)
	ctx := context.Background()
	fetch := func(t *testing.T, commit string) *Artifact {
		t.Helper()
		a, err := f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: commit, ID: commit}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// fetchBy fetches commit, which fetchCommit must get by strategy, and
	// checks a.txt holds body.
	fetchBy := func(t *testing.T, commit, strategy, body string) *Artifact {
		t.Helper()
		got := recordStrategy(t)
		a := fetch(t, commit)
		if *got != strategy {
			t.Errorf("fetched %s with strategy %q, want %q", commit, *got, strategy)
		}
		if b := readFile(t, filepath.Join(a.Dir, "a.txt")); b != body {
			t.Errorf("a.txt = %q", b)
		}
		return a
	}

	// A branch tip: a shallow fetch of the tip.
	head := fetchBy(t, r.c3, "tip", "one")
	if fi, err := os.Stat(filepath.Join(head.Dir, "bin/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("bin/run.sh lost its executable bit: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(head.Dir, "bin/link")); err != nil || target != "../a.txt" {
		t.Errorf("bin/link = %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(head.Dir, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git is in the fetched tree: %v", err)
	}
	want, err := TreeDigest(head.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if head.Digest != want || head.Commit != r.c3 {
		t.Errorf("artifact %+v, want digest %s", head.Ref, want)
	}

	t.Run("same tree, same digest", func(t *testing.T) {
		// c1 is a tag's tip, c3 the branch's: different commits, one tree.
		a := fetch(t, r.c1)
		if a.Digest != head.Digest {
			t.Errorf("digest %s != %s", a.Digest, head.Digest)
		}
		if a.Dir == head.Dir {
			t.Errorf("two commits share a store entry")
		}
		if b := fetch(t, r.c2); b.Digest == head.Digest {
			t.Errorf("different trees, same digest")
		}
	})
	t.Run("commit no ref points at", func(t *testing.T) {
		fetchBy(t, r.c0, "full", "zero")
	})
	t.Run("short commit is refused: Resolve expands it", func(t *testing.T) {
		_, err := f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c0[:10]}, nil)
		expectError(t, err, permanent, []string{"invalid commit", "full 40-hex"})
	})
	t.Run("unknown commit", func(t *testing.T) {
		_, err := f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: strings.Repeat("1", 40)}, nil)
		expectError(t, err, permanent, []string{`source "app": git file://`, "not found"})
	})
	t.Run("invalid commit is refused before touching the store", func(t *testing.T) {
		_, err := f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: "../../etc"}, nil)
		expectError(t, err, permanent, []string{"invalid commit"})
	})
	t.Run("digest mismatch", func(t *testing.T) {
		other := &Fetcher{Root: t.TempDir()}
		_, err := other.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c3, Digest: "sha256:" + strings.Repeat("0", 64)}, nil)
		expectError(t, err, permanent, []string{"digest mismatch"})
		// The helper pod's case: the operator's digest is honoured.
		a, err := other.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c3, Digest: head.Digest}, nil)
		if err != nil || a.Digest != head.Digest {
			t.Errorf("fetch with the right digest: %v, %v", a, err)
		}
	})
	t.Run("over max size", func(t *testing.T) {
		small := &Fetcher{Root: t.TempDir(), MaxSize: 8}
		_, err := small.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c3}, nil)
		expectError(t, err, permanent, []string{"maximum size of 8"})
	})
	t.Run("unchanged commit is served from the store without network", func(t *testing.T) {
		if err := os.Rename(r.dir, r.dir+".gone"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Rename(r.dir+".gone", r.dir) }()
		a := fetch(t, r.c3)
		if a.Dir != head.Dir || a.Digest != head.Digest {
			t.Errorf("got %+v, want the stored %+v", a, head)
		}
	})
}

// recordStrategy records the last fetch strategy used.
func recordStrategy(t *testing.T) *string {
	var mu sync.Mutex
	var last string
	gitStrategyHook = func(s string) {
		mu.Lock()
		defer mu.Unlock()
		last = s
	}
	t.Cleanup(func() { gitStrategyHook = nil })
	return &last
}

func TestGitShallowFetchByCommit(t *testing.T) {
	r := newGitRepo(t)
	// What GitHub and GitLab allow: any reachable commit in a want.
	if out, err := exec.Command("git", "-C", r.dir, "config", "uploadpack.allowReachableSHA1InWant", "true").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	strategy := recordStrategy(t)
	a, err := (&Fetcher{Root: t.TempDir()}).Fetch(context.Background(), Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *strategy != "want" {
		t.Errorf("strategy %q, want a shallow fetch by commit", *strategy)
	}
	if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "zero" {
		t.Errorf("a.txt = %q", got)
	}
}

func TestGitConcurrentFetchOfOneCommit(t *testing.T) {
	r := newGitRepo(t)
	f := &Fetcher{Root: t.TempDir()}
	const n = 4
	var wg sync.WaitGroup
	arts := make([]*Artifact, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			arts[i], errs[i] = f.Fetch(context.Background(), Ref{Source: "app", Kind: KindGit, URL: r.url, Commit: r.c2}, nil)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if arts[i].Dir != arts[0].Dir || arts[i].Digest != arts[0].Digest {
			t.Errorf("fetch %d: %+v differs from %+v", i, arts[i], arts[0])
		}
	}
	left, err := os.ReadDir(filepath.Join(f.Root, tmpDir))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary entries left behind: %v %v", left, err)
	}
}

// gitHTTPServer serves the repository in dir with git http-backend behind
// basic auth, as a git forge would, and returns its URL and the count of
// requests it served.
func gitHTTPServer(t *testing.T, dir, user, password string) (string, *counting) {
	t.Helper()
	gitBin := needGit(t)
	backend := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1"},
	}
	auth := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u+"\x00"+p), []byte(user+"\x00"+password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	})
	c := &counting{h: auth}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(dir), c
}

// commitFiles makes dir a repository with one commit of files, and
// returns the commit.
func commitFiles(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, files)
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1700000000, 0)}
	h, err := wt.Commit("files", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func TestGitOverHTTPWithBasicAuth(t *testing.T) {
	r := newGitRepo(t)
	const user, password = "dev", "s3cret-Pa55"
	url, requests := gitHTTPServer(t, r.dir, user, password)
	ctx := context.Background()
	branch := gitSource(url, &v1alpha1.GitRef{Branch: "dev"})
	f := newFetcher(t,
		secret("good", map[string]string{"username": user, "password": password}),
		secret("bad", map[string]string{"username": user, "password": "wrong-Pa55"}),
	)

	t.Run("no credentials", func(t *testing.T) {
		_, err := f.Resolve(ctx, testNamespace, branch)
		expectError(t, err, permanent, []string{`source "app": git ` + url, "authentication required"})
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := f.Resolve(ctx, testNamespace, withSecret(branch, "bad"))
		expectError(t, err, permanent, []string{`source "app": git ` + url, "authentication failed"}, "wrong-Pa55", password)
	})
	t.Run("missing secret", func(t *testing.T) {
		_, err := f.Resolve(ctx, testNamespace, withSecret(branch, "absent"))
		expectError(t, err, permanent, []string{`secret "absent" not found`})
	})
	t.Run("resolve and fetch", func(t *testing.T) {
		src := withSecret(branch, "good")
		ref, err := f.Resolve(ctx, testNamespace, src)
		if err != nil {
			t.Fatal(err)
		}
		if ref.Revision != "dev@sha1:"+r.c2 {
			t.Errorf("revision %q", ref.Revision)
		}
		a := fetchWithCredentials(t, f, ref, src)
		if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "two" {
			t.Errorf("a.txt = %q", got)
		}
		before := requests.n.Load()
		again := fetchWithCredentials(t, f, ref, src)
		if n := requests.n.Load() - before; n != 0 {
			t.Errorf("fetching an unchanged commit made %d requests", n)
		}
		if again.Dir != a.Dir || again.Digest != a.Digest {
			t.Errorf("got %+v, want %+v", again, a)
		}
	})
	t.Run("old commit over smart HTTP falls back to a full fetch", func(t *testing.T) {
		creds := &Credentials{Username: user, Password: password}
		a, err := f.Fetch(ctx, Ref{Source: "app", Kind: KindGit, URL: url, Commit: r.c0}, creds)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "zero" {
			t.Errorf("a.txt = %q", got)
		}
	})
}

func TestGitServerTrouble(t *testing.T) {
	ctx := context.Background()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()

	tests := []struct {
		name  string
		url   string
		class errorClass
		want  string
	}{
		{"server answers 503", down.URL + "/x.git", unavailable, "503"},
		{"connection refused", closed.URL + "/x.git", unavailable, "connection refused"},
		{"repository not found", missing.URL + "/x.git", permanent, "repository not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFetcher(t)
			_, err := f.Resolve(ctx, testNamespace, gitSource(tt.url, &v1alpha1.GitRef{Branch: "main"}))
			expectError(t, err, tt.class, []string{fmt.Sprintf(`source "app": git %s`, tt.url), tt.want})
		})
	}
}

// A password in a git URL would reach image labels and builder pod
// arguments: it is refused, and the refusal does not repeat it.
func TestGitURLPasswordIsRefusedAndRedacted(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	url := strings.Replace(closed.URL, "http://", "http://dev:hunter2-token@", 1) + "/x.git"
	_, err := newFetcher(t).Resolve(context.Background(), testNamespace, gitSource(url, nil))
	expectError(t, err, permanent, []string{"dev:xxxxx@", "a password in the URL is refused"}, "hunter2-token")
}
