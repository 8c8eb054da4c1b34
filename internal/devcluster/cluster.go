package devcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// Registry is the cluster's registry: one name for pushes from this host
// and from pods, and for pulls by the node (hack/cluster/README.md).
const Registry = "10.250.0.1:5000"

// Cluster is a connection to the local cluster.
type Cluster struct {
	// Root is the repository checkout (charts, samples, sources).
	Root       string
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Clientset  kubernetes.Interface
}

// Connect reads the cluster's admin kubeconfig under root/bin/cluster and
// checks that the API server and the registry answer.
func Connect(ctx context.Context, root string) (*Cluster, error) {
	kubeconfig := filepath.Join(root, "bin", "cluster", "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("no local cluster (%v): run `make cluster-up` first", err)
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get("http://" + Registry + "/v2/")
	if err != nil {
		return nil, fmt.Errorf("the cluster's registry does not answer (%v): run `make cluster-up` first", err)
	}
	resp.Body.Close()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the cluster's API server does not answer (%v): run `make cluster-up` first", err)
	}
	return &Cluster{Root: root, Kubeconfig: kubeconfig, Config: cfg, Client: c, Clientset: cs}, nil
}
