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
	q := r.URL.Query()
	ns, env, component := q.Get("namespace"), q.Get("env"), q.Get("component")
	if ns == "" || env == "" || component == "" {
		writeJSON(w, http.StatusBadRequest, HelmValues{Error: "namespace, env and component are required"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	v, err := h.Actions.Values(ctx, ns, env, component)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, HelmValues{Error: bounded(err.Error(), 1024)})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// endpointsAnswer is a component's Service ports (Endpoint).
type endpointsAnswer struct {
	Endpoints []Endpoint `json:"endpoints"`
	Error     string     `json:"error,omitempty"`
}

func (h *Handlers) endpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns, env, component := q.Get("namespace"), q.Get("env"), q.Get("component")
	if ns == "" || env == "" || component == "" {
		writeJSON(w, http.StatusBadRequest, endpointsAnswer{Error: "namespace, env and component are required"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	eps, err := h.Actions.Endpoints(ctx, ns, env, component)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, endpointsAnswer{Endpoints: []Endpoint{}, Error: bounded(err.Error(), 1024)})
		return
	}
	if eps == nil {
		eps = []Endpoint{}
	}
	writeJSON(w, http.StatusOK, endpointsAnswer{Endpoints: eps})
}
