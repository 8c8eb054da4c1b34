package source

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	gossh "golang.org/x/crypto/ssh"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// allowFileURLs lets tests use file:// repositories. The operator never
// does: a tenant's URL must not read the operator's own disk (the CRD
// refuses such URLs too).
var allowFileURLs = false

// gitStrategyHook, when set by tests, learns which way fetchCommit got a
// commit: "want" (shallow, by SHA), "tip" (shallow, by a ref at the commit)
// or "full".
var gitStrategyHook func(strategy string)

var commitPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// fullCommit is a commit as the store and the helper pods take it.
var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

func (f *Fetcher) resolveGit(ctx context.Context, namespace string, src v1alpha1.Source) (Ref, error) {
	g := src.Git
	s := subject{src.Name, "git", redactURL(g.URL)}
	if err := checkGitURL(g.URL); err != nil {
		return Ref{}, s.permanent("%v", err)
	}
	if u, err := url.Parse(g.URL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			// The URL becomes an image label and reaches builder pods as
			// an argument; a password in it would leak through both.
			return Ref{}, s.permanent("a password in the URL is refused: put the credentials in a Secret named by secretRef")
		}
	}
	ref := Ref{Source: src.Name, Kind: KindGit, URL: g.URL}
	var want v1alpha1.GitRef
	if g.Ref != nil {
		want = *g.Ref
	}
	var c string
	if want.Commit != "" {
		c = strings.ToLower(want.Commit)
		if !commitPattern.MatchString(c) {
			return Ref{}, s.permanent("commit %q is not a hex SHA", want.Commit)
		}
		if fullCommit.MatchString(c) {
			// A full commit names itself: nothing to ask the server here;
			// Serve checks access before any content is handed out.
			ref.Revision, ref.ID, ref.Commit = "sha1:"+c, c, c
			return ref, nil
		}
		if len(c) > 40 {
			return Ref{}, s.permanent("commit %q is longer than a SHA-1: SHA-256 repositories are not supported", want.Commit)
		}
	}

	creds, err := loadCredentials(ctx, f.Reader, namespace, src)
	if err != nil {
		return Ref{}, err
	}
	auth, err := gitAuth(g.URL, creds)
	if err != nil {
		return Ref{}, s.permanent("%v", err)
	}
	if c != "" {
		full, err := f.expandCommit(ctx, s, g.URL, c, auth)
		if err != nil {
			return Ref{}, err
		}
		ref.Revision, ref.ID, ref.Commit = "sha1:"+full, full, full
		return ref, nil
	}
	refs, err := lsRemote(ctx, g.URL, auth)
	if err != nil {
		return Ref{}, gitError(s, auth, err)
	}

	var name, hash string
	switch {
	case want.Branch != "":
		name, hash = want.Branch, refs["refs/heads/"+want.Branch]
		if hash == "" {
			return Ref{}, s.permanent("branch %q not found", want.Branch)
		}
	case want.Tag != "":
		// An annotated tag points at a tag object; the commit is the
		// peeled value.
		name = want.Tag
		hash = refs["refs/tags/"+want.Tag+"^{}"]
		if hash == "" {
			hash = refs["refs/tags/"+want.Tag]
		}
		if hash == "" {
			return Ref{}, s.permanent("tag %q not found", want.Tag)
		}
	default:
		name, hash = defaultBranch(refs)
		if hash == "" {
			return Ref{}, s.permanent("the remote has no HEAD to follow; set a branch, tag or commit")
		}
	}
	ref.Revision, ref.ID, ref.Commit = name+"@sha1:"+hash, hash, hash
	return ref, nil
}

// headTarget is where lsRemote records the branch HEAD points to.
const headTarget = "HEAD->"

// lsRemote lists the remote's references without cloning: name -> hash,
// peeled tags as "<tag>^{}", and HEAD's branch under headTarget.
func lsRemote(ctx context.Context, url string, auth transport.AuthMethod) (map[string]string, error) {
	if err := sshEgress(ctx, url, auth); err != nil {
		return nil, err
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	list, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, r := range list {
		switch r.Type() {
		case plumbing.HashReference:
			refs[r.Name().String()] = r.Hash().String()
		case plumbing.SymbolicReference:
			if r.Name() == plumbing.HEAD {
				refs[headTarget] = r.Target().String()
			}
		}
	}
	return refs, nil
}

// defaultBranch is the branch the remote's HEAD names, as `git clone`
// would check out.
func defaultBranch(refs map[string]string) (name, hash string) {
	if target := refs[headTarget]; strings.HasPrefix(target, "refs/heads/") {
		if h := refs[target]; h != "" {
			return strings.TrimPrefix(target, "refs/heads/"), h
		}
	}
	head := refs["HEAD"]
	if head == "" {
		return "", ""
	}
	// A server without the symref capability: pick a branch at HEAD's
	// commit, preferring the usual names, as old git clients did.
	for _, b := range []string{"main", "master"} {
		if refs["refs/heads/"+b] == head {
			return b, head
		}
	}
	var names []string
	for n, h := range refs {
		if h == head && strings.HasPrefix(n, "refs/heads/") {
			names = append(names, strings.TrimPrefix(n, "refs/heads/"))
		}
	}
	if len(names) == 0 {
		return "HEAD", head
	}
	slices.Sort(names)
	return names[0], head
}

// checkGitURL refuses transports the operator must not use.
func checkGitURL(raw string) error {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return fmt.Errorf("invalid URL: %v", err)
	}
	switch ep.Protocol {
	case "https", "http", "ssh":
		return nil
	case "file":
		if allowFileURLs {
			return nil
		}
	}
	return fmt.Errorf("unsupported URL scheme %q: use https or ssh", ep.Protocol)
}

// gitAuth turns credentials into a go-git auth method for the URL's
// transport. SSH always verifies the host key against the Secret's
// known_hosts: go-git would otherwise fall back to the process's
// ~/.ssh/known_hosts or an agent, neither of which belongs to the tenant.
func gitAuth(raw string, creds *Credentials) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %v", err)
	}
	switch ep.Protocol {
	case "ssh":
		if creds == nil || len(creds.SSHIdentity) == 0 {
			return nil, fmt.Errorf("an ssh URL needs a secretRef with keys %q and %q", KeyIdentity, KeyKnownHosts)
		}
		if len(creds.KnownHosts) == 0 {
			return nil, fmt.Errorf("secret has no %q: SSH without host key verification is refused", KeyKnownHosts)
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		// Flux's convention: "password" is the identity's passphrase.
		keys, err := gitssh.NewPublicKeys(user, creds.SSHIdentity, creds.Password)
		if err != nil {
			return nil, fmt.Errorf("key %q is not a usable private key (or its passphrase is wrong)", KeyIdentity)
		}
		port := ep.Port
		if port == 0 {
			port = 22
		}
		cb, algos, err := knownHostsCallback(creds.KnownHosts, net.JoinHostPort(ep.Host, strconv.Itoa(port)))
		if err != nil {
			return nil, err
		}
		keys.HostKeyCallback = cb
		keys.HostKeyAlgorithms = algos
		return keys, nil
	case "http", "https":
		if creds == nil {
			return nil, nil
		}
		if creds.Username == "" && creds.Password == "" {
			// Sending nothing would surface as "authentication required"
			// although a secretRef is set: say what is wrong with it.
			return nil, fmt.Errorf("an %s URL needs keys %q and %q in the secret", ep.Protocol, KeyUsername, KeyPassword)
		}
		return &githttp.BasicAuth{Username: creds.Username, Password: creds.Password}, nil
	}
	return nil, nil
}

// knownHostsCallback verifies host keys against known_hosts content. The
// parser only reads files, so the content goes through a private temporary
// file that is removed at once. The algorithms list makes the server offer
// a key type the file knows, not one it would then refuse.
func knownHostsCallback(knownHosts []byte, hostPort string) (gossh.HostKeyCallback, []string, error) {
	f, err := os.CreateTemp("", "devloop-known-hosts-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(knownHosts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, nil, fmt.Errorf("key %q is not a valid known_hosts file", KeyKnownHosts)
	}
	return db.HostKeyCallback(), db.HostKeyAlgorithms(hostPort), nil
}

// gitError classifies go-git's errors: answers that will not change by
// themselves are Permanent, trouble reaching the server Unavailable.
func gitError(s subject, auth transport.AuthMethod, err error) error {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired) && auth == nil:
		return s.permanent("authentication required: set a secretRef")
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return s.permanent("authentication failed: the server refused the secretRef's credentials")
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return s.permanent("access denied with the given credentials")
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return s.permanent("repository not found (or not visible with the given credentials)")
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return s.permanent("the repository is empty")
	case errors.Is(err, transport.ErrInvalidAuthMethod):
		return s.permanent("credentials do not fit the URL's transport")
	}
	var status int
	causes(err, func(e error) bool {
		if se, ok := e.(interface{ StatusCode() int }); ok {
			status = se.StatusCode()
			return true
		}
		return false
	})
	switch {
	case status >= 500 || status == 429:
		return s.unavailable("server answered %d", status)
	case status >= 400:
		return s.permanent("server answered %d", status)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "knownhosts: key mismatch"), strings.Contains(msg, "knownhosts: key is unknown"):
		return s.permanent("host key verification failed against %q: %v", KeyKnownHosts, err)
	case strings.Contains(msg, "ssh: unable to authenticate"):
		return s.permanent("SSH authentication failed with the given identity")
	}
	return s.wrap(err)
}

func (f *Fetcher) fetchGit(s subject, ref Ref, creds *Credentials) filler {
	return func(ctx context.Context, content, scratch string) (entryMeta, error) {
		if err := checkGitURL(ref.URL); err != nil {
			return entryMeta{}, s.permanent("%v", err)
		}
		auth, err := gitAuth(ref.URL, creds)
		if err != nil {
			return entryMeta{}, s.permanent("%v", err)
		}
		// go-git writes the pack to disk itself: its size is bounded by
		// watching the disk it takes.
		limit := downloadLimit(f.maxSize())
		fetchCtx, stop := watchSize(ctx, scratch, limit)
		repo, hash, err := fetchCommit(fetchCtx, s, ref, auth, scratch, content)
		if stop() {
			return entryMeta{}, s.permanent("fetching commit %s downloads more than %d bytes", ref.Commit, limit)
		}
		if err != nil {
			return entryMeta{}, err
		}
		commit, err := repo.CommitObject(hash)
		if err != nil {
			return entryMeta{}, s.permanent("commit %s not found: %v", ref.Commit, err)
		}
		// Git packs compress well: check the size the tree will have on
		// disk before writing it.
		if err := checkTreeSize(commit, f.maxSize()); err != nil {
			return entryMeta{}, s.wrap(err)
		}
		wt, err := repo.Worktree()
		if err != nil {
			return entryMeta{}, fmt.Errorf("%s: %w", s, err)
		}
		if err := wt.Checkout(&git.CheckoutOptions{Hash: hash, Force: true}); err != nil {
			return entryMeta{}, s.wrap(fmt.Errorf("checking out %s: %w", hash, err))
		}
		// The object database lives in scratch; go-git leaves a ".git"
		// file here pointing at it, which must not reach builds or the
		// digest.
		if err := os.RemoveAll(filepath.Join(content, ".git")); err != nil {
			return entryMeta{}, err
		}
		digest, err := treeDigestLimited(content, f.maxSize())
		if err != nil {
			return entryMeta{}, s.wrap(err)
		}
		return entryMeta{Digest: digest}, nil
	}
}

// fetchCommit gets one commit into a fresh repository whose object
// database is under scratch and whose worktree is content, as cheaply as
// the server allows: a shallow fetch of the commit itself (servers allowing
// SHA-1 in want, like GitHub and GitLab), else a shallow fetch of a branch
// or tag whose tip is the commit, else a full fetch of branches and tags.
func fetchCommit(ctx context.Context, s subject, ref Ref, auth transport.AuthMethod, scratch, content string) (*git.Repository, plumbing.Hash, error) {
	attempt := 0
	newRepo := func() (*git.Repository, error) {
		attempt++
		gitDir := filepath.Join(scratch, fmt.Sprintf("git-%d", attempt))
		if err := os.RemoveAll(filepath.Join(scratch, fmt.Sprintf("git-%d", attempt-1))); err != nil {
			return nil, err
		}
		st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
		repo, err := git.Init(st, osfs.New(content, osfs.WithBoundOS()))
		if err != nil {
			return nil, err
		}
		_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{ref.URL}})
		return repo, err
	}
	fetch := func(repo *git.Repository, depth int, specs ...config.RefSpec) error {
		if err := sshEgress(ctx, ref.URL, auth); err != nil {
			return err
		}
		err := repo.FetchContext(ctx, &git.FetchOptions{
			RemoteName: "origin",
			RefSpecs:   specs,
			Depth:      depth,
			Auth:       auth,
			Tags:       git.NoTags,
		})
		if errors.Is(err, git.NoErrAlreadyUpToDate) {
			return nil
		}
		return err
	}
	has := func(repo *git.Repository, h plumbing.Hash) bool {
		_, err := repo.CommitObject(h)
		return err == nil
	}
	// fatal tells errors that another strategy cannot fix (no access,
	// server down) from a server refusing this particular strategy.
	fatal := func(err error) bool {
		return errors.Is(err, transport.ErrAuthenticationRequired) ||
			errors.Is(err, transport.ErrAuthorizationFailed) ||
			errors.Is(err, transport.ErrRepositoryNotFound) ||
			isNetworkError(err) || ctx.Err() != nil
	}

	full := len(ref.Commit) == 40
	used := func(strategy string) {
		if gitStrategyHook != nil {
			gitStrategyHook(strategy)
		}
	}
	want := plumbing.NewHash(ref.Commit)
	if full {
		repo, err := newRepo()
		if err != nil {
			return nil, want, err
		}
		err = fetch(repo, 1, config.RefSpec(ref.Commit+":refs/devloop/want"))
		if err == nil && has(repo, want) {
			used("want")
			return repo, want, nil
		}
		if err != nil && fatal(err) {
			return nil, want, gitError(s, auth, err)
		}

		refs, err := lsRemote(ctx, ref.URL, auth)
		if err != nil {
			return nil, want, gitError(s, auth, err)
		}
		for _, name := range slices.Sorted(maps.Keys(refs)) {
			if refs[name] != ref.Commit || name == "HEAD" || !strings.HasPrefix(name, "refs/") {
				continue
			}
			name = strings.TrimSuffix(name, "^{}")
			repo, err := newRepo()
			if err != nil {
				return nil, want, err
			}
			err = fetch(repo, 1, config.RefSpec("+"+name+":refs/devloop/tip"))
			if err == nil && has(repo, want) {
				used("tip")
				return repo, want, nil
			}
			if err != nil && fatal(err) {
				return nil, want, gitError(s, auth, err)
			}
			break // the ref moved on since the listing: fetch everything
		}
	}

	repo, err := newRepo()
	if err != nil {
		return nil, want, err
	}
	err = fetch(repo, 0,
		config.RefSpec("+refs/heads/*:refs/devloop/heads/*"),
		config.RefSpec("+refs/tags/*:refs/devloop/tags/*"))
	if err != nil {
		return nil, want, gitError(s, auth, err)
	}
	used("full")
	if full {
		if !has(repo, want) {
			return nil, want, s.permanent("commit %s not found in any branch or tag", ref.Commit)
		}
		return repo, want, nil
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref.Commit))
	if err != nil || !has(repo, *h) {
		return nil, want, s.permanent("commit %s not found in any branch or tag", ref.Commit)
	}
	return repo, *h, nil
}

// checkTreeSize sums the blob sizes of a commit's tree from object headers,
// without inflating the blobs.
func checkTreeSize(commit *object.Commit, limit int64) error {
	tree, err := commit.Tree()
	if err != nil {
		return err
	}
	var total int64
	n := 0
	return tree.Files().ForEach(func(f *object.File) error {
		total += f.Size
		n++
		if total > limit {
			return tooLarge(limit)
		}
		if n > maxEntries {
			return unsafeContent("more than %d entries", maxEntries)
		}
		return nil
	})
}

// expandCommit turns a short SHA into the full commit it abbreviates in
// the repository at url, read with the environment's own auth: from the
// advertised refs when a branch or tag is at it, else by fetching every
// branch and tag into a private staging directory that is removed at
// once. A prefix matching more than one commit is refused.
func (f *Fetcher) expandCommit(ctx context.Context, s subject, url, short string, auth transport.AuthMethod) (string, error) {
	refs, err := lsRemote(ctx, url, auth)
	if err != nil {
		return "", gitError(s, auth, err)
	}
	found := map[string]bool{}
	for name, h := range refs {
		if name != headTarget && strings.HasPrefix(h, short) {
			found[h] = true
		}
	}
	if len(found) == 0 {
		if gitStrategyHook != nil {
			gitStrategyHook("expand-full")
		}
		staging, err := f.stagingDir("expand-")
		if err != nil {
			return "", fmt.Errorf("%s: %w", s, err)
		}
		defer func() { _ = os.RemoveAll(staging) }()
		st := filesystem.NewStorage(osfs.New(staging), cache.NewObjectLRUDefault())
		repo, err := git.Init(st, nil)
		if err != nil {
			return "", err
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
			return "", err
		}
		limit := downloadLimit(f.maxSize())
		fetchCtx, stop := watchSize(ctx, staging, limit)
		err = repo.FetchContext(fetchCtx, &git.FetchOptions{
			RemoteName: "origin",
			RefSpecs: []config.RefSpec{
				"+refs/heads/*:refs/devloop/heads/*",
				"+refs/tags/*:refs/devloop/tags/*",
			},
			Auth: auth,
			Tags: git.NoTags,
		})
		if stop() {
			return "", s.permanent("expanding commit %s downloads more than %d bytes: give the full commit", short, limit)
		}
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return "", gitError(s, auth, err)
		}
		commits, err := repo.CommitObjects()
		if err != nil {
			return "", err
		}
		err = commits.ForEach(func(c *object.Commit) error {
			if h := c.Hash.String(); strings.HasPrefix(h, short) {
				found[h] = true
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	switch len(found) {
	case 0:
		return "", s.permanent("commit %s not found in any branch or tag", short)
	case 1:
		for h := range found {
			return h, nil
		}
	}
	return "", s.permanent("commit %s is ambiguous: %d commits start with it; give more digits", short, len(found))
}

// checkGitAccess is the access check of a git entry: the repository
// answers an ls-remote with the environment's own credentials.
func checkGitAccess(ctx context.Context, s subject, ref Ref, creds *Credentials) error {
	if err := checkGitURL(ref.URL); err != nil {
		return s.permanent("%v", err)
	}
	auth, err := gitAuth(ref.URL, creds)
	if err != nil {
		return s.permanent("%v", err)
	}
	if _, err := lsRemote(ctx, ref.URL, auth); err != nil {
		return gitError(s, auth, err)
	}
	return nil
}
