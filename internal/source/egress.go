package source

import (
	"context"
	"net"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/devloop-dev/devloop/internal/egress"
)

// go-git picks its HTTP transport from a process-wide table: it is
// replaced once by one that applies the egress policy of each request's
// context (Fetcher.Egress, put there by withEgress), with timeouts and a
// redirect cap, and checks nothing for a context without a policy (helper
// pods, which run in the tenant's network).
func init() {
	c := githttp.NewClient(egress.ContextClient())
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
}

// withEgress carries f's egress policy in ctx, for the clients shared by
// the process (go-git) that read it from there.
func (f *Fetcher) withEgress(ctx context.Context) context.Context {
	return egress.WithPolicy(ctx, f.Egress)
}

// sshEgress applies the policy in ctx to an SSH git URL, whose dialler
// go-git does not let anyone replace: the host's addresses are checked
// before go-git dials, and the address reached is checked again in the
// host key callback, before any credential is sent.
func sshEgress(ctx context.Context, url string, auth transport.AuthMethod) error {
	p := egress.FromContext(ctx)
	keys, ok := auth.(*gitssh.PublicKeys)
	if p == nil || !ok {
		return nil
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	if err := p.CheckResolved(ctx, net.JoinHostPort(ep.Host, strconv.Itoa(port))); err != nil {
		return err
	}
	keys.HostKeyCallback = p.HostKeyCallback(keys.HostKeyCallback)
	return nil
}
