package ui

import (
	"context"
	"errors"
	"net/http"
)

// MaxObjects bounds the objects of one component read when its panel
// opens: each is a GET as the user, done on demand rather than watched.
const MaxObjects = 50

// ObjectStatus is one applied object and its kstatus: Current,
// InProgress, Failed, Terminating, NotFound or Unknown (when it could not
// be read, the message says why).
type ObjectStatus struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message,omitempty"`
}

// objectsAnswer is the objects of a component and how many were left
// unread past MaxObjects.
type objectsAnswer struct {
	Objects []ObjectStatus `json:"objects"`
	More    int            `json:"more,omitempty"`
	Error   string         `json:"error,omitempty"`
}

func (h *Handlers) objects(w http.ResponseWriter, r *http.Request) {
	readComponent(w, r, func(ctx context.Context, ns, env, component string) (objectsAnswer, error) {
		objs, left, err := h.Actions.Objects(ctx, ns, env, component)
		return objectsAnswer{Objects: objs, More: left}, err
	}, func(msg string) any { return objectsAnswer{Error: msg} })
}

func (h *Handlers) listForwards(w http.ResponseWriter, _ *http.Request) {
	if h.Forwards == nil {
		writeJSON(w, http.StatusOK, []ForwardInfo{})
		return
	}
	writeJSON(w, http.StatusOK, h.Forwards.List())
}

// portForward starts (action start) or stops (action stop) the forward
// of one declared port; the answer's value is the local URL.
func (h *Handlers) portForward(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, a actionRequest) (string, error) {
		if h.Forwards == nil {
			return "", errors.New("this dashboard cannot start port-forwards")
		}
		if a.Component == "" || a.Port == "" {
			return "", errors.New("component and port (components[].ports[].name) are required")
		}
		switch a.Action {
		case "start":
			info, err := h.Forwards.Start(ctx, a.Namespace, a.Env, a.Component, a.Port)
			return info.URL, err
		case "stop":
			if !h.Forwards.Stop(a.Namespace, a.Env, a.Component, a.Port) {
				return "not running", nil
			}
			return "stopped", nil
		}
		return "", errors.New("action: want start or stop")
	})
}
