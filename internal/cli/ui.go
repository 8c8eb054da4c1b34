package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/devloop-dev/devloop/internal/ui"
)

func newUICommand(a *app) *cobra.Command {
	var port int
	var noOpen, all bool
	var selector string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the dashboard: environments, graph, logs, tests and the change timeline, live in the browser",
		Long: `Start the dashboard on 127.0.0.1 and open it in the browser. It shows the
DevEnvironments you can list (-n NAMESPACE, the kubeconfig's namespace by
default, or -A for all namespaces; -l to select by label) and acts as you,
with your kubeconfig: what your RBAC refuses, the page cannot do either.

The URL it prints carries a one-time code: the page trades it for a token of
its own, kept in the tab and sent as a header (never a cookie, so no other
server on 127.0.0.1 receives it). The URL works once; the page's "new tab"
link opens another. Requests with another Host header, without a token, or
from another site are refused. Ctrl-C stops it.`,
		Example: `  kubectl devloop ui
  kubectl devloop ui -A -l team=scheduling
  kubectl devloop ui -n dev --port 8765 --no-open`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.connect()
			if err != nil {
				return err
			}
			scope := ui.Scope{Namespace: s.namespace, Selector: selector}
			if all {
				scope.Namespace = ""
			}
			return a.serveUI(cmd.Context(), s, scope, port, !noOpen)
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "the local port (0: any free port)")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "print the URL; do not open a browser")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "the environments of every namespace (needs cluster-wide list and watch)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only the environments with these labels (a label selector)")
	return cmd
}

// serveUI runs the dashboard until ctx ends (Ctrl-C): then it returns
// exit code 130, interrupted, as every command of the plugin does.
func (a *app) serveUI(parent context.Context, s *session, scope ui.Scope, port int, open bool) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("listening on 127.0.0.1:%d: %w", port, err)
	}
	defer ln.Close()
	guard, err := ui.NewLocalGuard(ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	store, err := ui.NewStore(ctx, s.config, scope)
	if err != nil {
		return err
	}
	actions := &uiActions{a: a, s: s}
	forwards := ui.NewForwards(uiForwarder{u: actions}, ui.MaxForwards)
	// Every port-forward started from the page ends with the server.
	defer forwards.Close()
	h := &ui.Handlers{Store: store, Actions: actions, Scope: scope, Forwards: forwards}
	srv := &http.Server{Handler: guard.Wrap(h.Handler()), ReadHeaderTimeout: 10 * time.Second,
		// Requests end with the server: the page's live streams close at
		// once, so an open page says Disconnected instead of showing the
		// last states as if they were current.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(a.out(), "devloop dashboard: %s\n(Ctrl-C stops it; the URL opens one page, once)\n", guard.URL())
	if open {
		openBrowser(guard.URL())
	}
	go func() {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.Background(), 2*time.Second)
		defer done()
		if srv.Shutdown(shut) != nil {
			_ = srv.Close()
		}
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if parent.Err() != nil {
		return &ExitError{Code: 130, Err: errors.New("interrupted: the dashboard stopped")}
	}
	return nil
}

// openBrowser opens url; failing that, the user has the printed URL.
func openBrowser(url string) {
	name := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name = "explorer"
	}
	cmd := exec.Command(name, url)
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}
