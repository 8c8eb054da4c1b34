package ui

import (
	"context"
	"net/http"
	"time"
)

// HelmValues is what the page shows of a Helm component's values: the
// values the operator passed to Helm, read from the release Helm stored
// (its storage Secret, as the user), or, when that cannot be read, the
// spec's values and valuesFrom names with Note saying why.
type HelmValues struct {
	// From is "release" (Release at Revision) or "spec".
	From     string `json:"from"`
	Release  string `json:"release,omitempty"`
	Revision int    `json:"revision,omitempty"`
	Values   any    `json:"values"`
	// ValuesFrom names the spec's valuesFrom (From "spec" only: their
	// content is in the release's values once one is read).
	ValuesFrom []string `json:"valuesFrom,omitempty"`
	Note       string   `json:"note,omitempty"`
	Error      string   `json:"error,omitempty"`
}

func (h *Handlers) values(w http.ResponseWriter, r *http.Request) {
	readComponent(w, r, h.Actions.Values, func(msg string) any { return HelmValues{Error: msg} })
}

// endpointsAnswer is a component's Service ports (Endpoint).
type endpointsAnswer struct {
	Endpoints []Endpoint `json:"endpoints"`
	Error     string     `json:"error,omitempty"`
}

func (h *Handlers) endpoints(w http.ResponseWriter, r *http.Request) {
	readComponent(w, r, func(ctx context.Context, ns, env, component string) (endpointsAnswer, error) {
		eps, err := h.Actions.Endpoints(ctx, ns, env, component)
		if eps == nil {
			eps = []Endpoint{}
		}
		return endpointsAnswer{Endpoints: eps}, err
	}, func(msg string) any { return endpointsAnswer{Endpoints: []Endpoint{}, Error: msg} })
}

// readComponent serves a GET that reads something of one component as
// the user (its values, endpoints, objects): the query must name the
// namespace, the environment and the component (400 otherwise), the read
// is bounded in time, and a refused read is 422 with its error, each
// failure in the answer's own shape (failed).
func readComponent[T any](w http.ResponseWriter, r *http.Request, read func(ctx context.Context, ns, env, component string) (T, error), failed func(msg string) any) {
	q := r.URL.Query()
	ns, env, component := q.Get("namespace"), q.Get("env"), q.Get("component")
	if ns == "" || env == "" || component == "" {
		writeJSON(w, http.StatusBadRequest, failed("namespace, env and component are required"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	v, err := read(ctx, ns, env, component)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, failed(bounded(err.Error(), 1024)))
		return
	}
	writeJSON(w, http.StatusOK, v)
}
