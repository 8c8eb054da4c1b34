package metrics

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Verbs a request is counted under. Reads are get, list, watch and
// discovery; writes are create, update, patch, delete and
// deletecollection; a server-side dry run (dryRun=All) writes nothing and
// is counted apart.
const (
	VerbGet              = "get"
	VerbList             = "list"
	VerbWatch            = "watch"
	VerbDiscovery        = "discovery"
	VerbCreate           = "create"
	VerbUpdate           = "update"
	VerbPatch            = "patch"
	VerbDelete           = "delete"
	VerbDeleteCollection = "deletecollection"
	VerbDryRun           = "dryrun"
)

// APIRequests counts every request the operator makes to the API server,
// its own and those impersonating an environment's ServiceAccount, by
// verb. Divided by controller_runtime_reconcile_total it is the cost of a
// reconcile.
var APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "devloop_api_requests_total",
	Help: "Requests to the Kubernetes API server, by verb (get, list, watch, discovery, create, update, patch, delete, deletecollection, dryrun).",
}, []string{"verb"})

// Requests is a count of API requests by verb, readable in process (the
// steady-state benchmark reads its operator's, CountRequests; Prometheus
// reads APIRequests).
type Requests struct {
	counts [len(allVerbs)]atomic.Int64
}

var allVerbs = [...]string{VerbGet, VerbList, VerbWatch, VerbDiscovery, VerbCreate, VerbUpdate, VerbPatch,
	VerbDelete, VerbDeleteCollection, VerbDryRun}

// Snapshot is a copy of the counts by verb.
type Snapshot map[string]int64

// Snapshot copies the counts.
func (r *Requests) Snapshot() Snapshot {
	s := Snapshot{}
	for i, v := range allVerbs {
		s[v] = r.counts[i].Load()
	}
	return s
}

// Sub is the counts of s less those of before.
func (s Snapshot) Sub(before Snapshot) Snapshot {
	d := Snapshot{}
	for v, n := range s {
		d[v] = n - before[v]
	}
	return d
}

// Reads are get, list, watch and discovery requests.
func (s Snapshot) Reads() int64 {
	return s[VerbGet] + s[VerbList] + s[VerbWatch] + s[VerbDiscovery]
}

// Writes are the requests that change something (dry runs excluded).
func (s Snapshot) Writes() int64 {
	return s[VerbCreate] + s[VerbUpdate] + s[VerbPatch] + s[VerbDelete] + s[VerbDeleteCollection]
}

func (r *Requests) add(verb string) {
	for i, v := range allVerbs {
		if v == verb {
			r.counts[i].Add(1)
			return
		}
	}
}

// CountRequests makes every request through cfg, and through every copy
// of it (rest.CopyConfig keeps the wrapper: impersonated tenants and Helm
// are counted too), count in APIRequests and in the Requests it returns:
// the counts of that config's operator alone, so two operators in one
// process (an envtest suite beside a benchmark) do not count each
// other's requests.
func CountRequests(cfg *rest.Config) *Requests {
	counts := &Requests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{next: rt, counts: counts}
	})
	return counts
}

type countingTransport struct {
	next   http.RoundTripper
	counts *Requests
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := RequestVerb(req)
	APIRequests.WithLabelValues(verb).Inc()
	t.counts.add(verb)
	return t.next.RoundTrip(req)
}

// RequestVerb is the Kubernetes verb of an API request, from its method,
// path and query, as the API server's authorizer would name it (watch and
// list told apart by the query, get and list by the path), with dry runs
// and discovery apart.
func RequestVerb(req *http.Request) string {
	q := req.URL.Query()
	if q.Get("dryRun") != "" {
		return VerbDryRun
	}
	collection, ok := resourcePath(req.URL.Path)
	if !ok {
		return VerbDiscovery
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			return VerbWatch
		case collection:
			return VerbList
		}
		return VerbGet
	case http.MethodPost:
		return VerbCreate
	case http.MethodPut:
		return VerbUpdate
	case http.MethodPatch:
		return VerbPatch
	case http.MethodDelete:
		if collection {
			return VerbDeleteCollection
		}
		return VerbDelete
	}
	return strings.ToLower(req.Method)
}

// resourcePath says whether path names a resource (ok) and whether it is
// a collection rather than one object: /api/v1/namespaces/ns/configmaps is
// a collection, .../configmaps/name and .../configmaps/name/status are
// objects. /api, /apis, /apis/group/version and /openapi are discovery.
func resourcePath(path string) (collection, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return false, false
	}
	if len(parts) == 0 {
		return false, false
	}
	if parts[0] == "namespaces" && len(parts) >= 3 {
		parts = parts[2:]
	}
	return len(parts) == 1, true
}

func init() {
	crmetrics.Registry.MustRegister(APIRequests)
}
