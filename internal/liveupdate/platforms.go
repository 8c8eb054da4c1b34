package liveupdate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/engine"
)

// An image of several platforms (images[].platforms) is an index: each
// node pulls its own platform's image, so a live update plans each
// platform (plan) and syncs every pod with the tar of its node's
// platform, read from the node's kubernetes.io/os and kubernetes.io/arch
// labels (the kubelet sets them). A pod on a node of a platform the image
// is not built for cannot be synced: the image is rolled out.

// maxNodesListed bounds the nodes read for one sync.
const maxNodesListed = 1000

// syncPerPlatform syncs each target with the tar of its node's platform.
func (e *Engine) syncPerPlatform(ctx context.Context, req engine.Request, cl client.Client, todo []Target, digest string, tars map[string][]byte) ([]string, error) {
	platforms, err := e.nodePlatforms(ctx)
	if err != nil {
		return nil, &SyncError{Pod: todo[0].Namespace + "/" + todo[0].Pod, Err: err}
	}
	groups := map[string][]Target{}
	for _, t := range todo {
		p, ok := tarPlatform(tars, platforms[t.Node])
		if !ok {
			have := platforms[t.Node]
			if have == "" {
				have = "of no known platform"
			}
			return nil, &SyncError{Pod: t.Namespace + "/" + t.Pod,
				Err: fmt.Errorf("its node %s is %s, which the image is not built for (images[].platforms)", t.Node, have)}
		}
		groups[p] = append(groups[p], t)
	}
	var synced []string
	var firstErr error
	for _, p := range slices.Sorted(maps.Keys(groups)) {
		s, err := e.syncAll(ctx, req.Tenant, req.Env.UID, cl, groups[p], digest, tars[p])
		synced = append(synced, s...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return synced, firstErr
}

// nodePlatforms are the nodes' platforms as "os/arch", by node name.
func (e *Engine) nodePlatforms(ctx context.Context) (map[string]string, error) {
	if e.Nodes == nil {
		return nil, errors.New("no reader of nodes: the platform of a pod's node is unknown")
	}
	nodes := &corev1.NodeList{}
	if err := e.Nodes.List(ctx, nodes, client.Limit(maxNodesListed)); err != nil {
		return nil, fmt.Errorf("listing nodes for their platforms: %w", err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		os, arch := n.Labels[corev1.LabelOSStable], n.Labels[corev1.LabelArchStable]
		if os == "" || arch == "" {
			os, arch = n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture
		}
		if os != "" && arch != "" {
			out[n.Name] = os + "/" + arch
		}
	}
	return out, nil
}

// tarPlatform is the platform of tars (images[].platforms entries,
// os/arch[/variant]) for a node of platform node (os/arch): the first,
// in order, of its os and arch.
func tarPlatform(tars map[string][]byte, node string) (string, bool) {
	if node == "" {
		return "", false
	}
	for _, p := range slices.Sorted(maps.Keys(tars)) {
		if p == node || strings.HasPrefix(p, node+"/") {
			return p, true
		}
	}
	return "", false
}
