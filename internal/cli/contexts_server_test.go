package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// runWithKubeconfig runs the plugin with a kubeconfig of the test's own.
func runWithKubeconfig(t *testing.T, kubeconfigPath string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	code := Run(ctx, append(args, "--kubeconfig", kubeconfigPath), genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, testOptions())
	return result{out: out.String(), err: errOut.String(), code: code}
}

// writeKubeconfig writes the suite's kubeconfig changed by edit.
func writeKubeconfig(t *testing.T, edit func(c *clientcmdapi.Config)) string {
	t.Helper()
	c, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	edit(c)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The allowed-contexts guard holds a context to its cluster: --server,
// --cluster and another kubeconfig reusing the allowed name are refused
// before anything is sent.
func TestContextGuardChecksTheServer(t *testing.T) {
	writeSettings(t, "")
	t.Setenv(AllowedContextsEnv, contextName)
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())

	host := strings.TrimSuffix(restConfig.Host, "/")
	// The first use records the context's server.
	if r := plugin(t, "status", "team", "-n", ns); r.code != 0 {
		t.Fatalf("allowed context refused:\n%s", r)
	}
	data, err := os.ReadFile(KnownServersFile())
	if err != nil || !strings.Contains(string(data), host) {
		t.Fatalf("servers file: %q, %v; want it to record %s", data, err, host)
	}

	const elsewhere = "https://127.0.0.2:6443"
	withOther := writeKubeconfig(t, func(c *clientcmdapi.Config) {
		other := c.Clusters[c.Contexts[contextName].Cluster].DeepCopy()
		other.Server = elsewhere
		c.Clusters["other"] = other
	})
	sameNameElsewhere := writeKubeconfig(t, func(c *clientcmdapi.Config) {
		c.Clusters[c.Contexts[contextName].Cluster].Server = elsewhere
	})
	for _, c := range []struct {
		name string
		run  func() result
		want string
	}{
		{"--server", func() result { return plugin(t, "status", "team", "-n", ns, "--server", elsewhere) }, "refusing server " + elsewhere + `: the allowed context "` + contextName + `" names the server ` + host},
		{"--cluster", func() result {
			return runWithKubeconfig(t, withOther, "status", "team", "-n", ns, "--cluster", "other")
		}, "refusing server " + elsewhere},
		{"another kubeconfig", func() result { return runWithKubeconfig(t, sameNameElsewhere, "status", "team", "-n", ns) }, `context "` + contextName + `" was first used with the server ` + host},
		{"trigger with --server", func() result { return plugin(t, "trigger", "team", "unit", "-n", ns, "--server", elsewhere) }, "refusing server"},
	} {
		r := c.run()
		if r.code != 1 || !strings.Contains(r.err, c.want) {
			t.Errorf("%s: want a refusal saying %q, got\n%s", c.name, c.want, r)
		}
	}

	// Without an allow-list nothing is checked or recorded.
	t.Setenv(AllowedContextsEnv, "")
	writeSettings(t, "")
	if r := plugin(t, "status", "team", "-n", ns); r.code != 0 {
		t.Fatalf("no allow-list:\n%s", r)
	}
	if _, err := os.Stat(KnownServersFile()); !os.IsNotExist(err) {
		t.Errorf("a servers file was written without an allow-list: %v", err)
	}
}
