package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// --build-cache-service names the Service the leader points at its own
// pod: its namespace and name, the port the cache binds and the pod's
// address; a value that cannot be used is refused at start, naming what
// is missing, rather than by a runnable failing once the pod leads.
func TestBuildCacheServiceFlag(t *testing.T) {
	t.Setenv("POD_IP", "10.244.1.7")
	o, err := parseFlags([]string{"--build-cache-bind-address=:5003", "--build-cache-url=https://devloop-build-cache.devloop-system.svc:5003",
		"--build-cache-service=devloop-system/devloop-build-cache"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := o.buildCache.leaderEndpoint(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Service.Namespace != "devloop-system" || e.Service.Name != "devloop-build-cache" || e.Port != 5003 || e.PodIP != "10.244.1.7" {
		t.Errorf("leader endpoint %+v, want devloop-system/devloop-build-cache, port 5003, 10.244.1.7", e)
	}
	for _, c := range []struct{ service, listen, podIP, want string }{
		{"devloop-build-cache", ":5003", "10.244.1.7", "NAMESPACE/NAME"},
		{"devloop-system/devloop-build-cache", "", "10.244.1.7", "--build-cache-bind-address"},
		{"devloop-system/devloop-build-cache", ":5003", "", "POD_IP"},
	} {
		t.Setenv("POD_IP", c.podIP)
		o := buildCacheOptions{service: c.service, listen: c.listen}
		if _, err := o.leaderEndpoint(&rest.Config{Host: "https://127.0.0.1:6443"}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one naming %s", c, err, c.want)
		}
	}
}
