// Package ui is the dashboard of `kubectl devloop ui`: HTTP handlers that
// show the environments a user can see and act on them as that user. The
// handlers know nothing of where they run: the plugin serves them on
// 127.0.0.1 behind LocalGuard with the user's kubeconfig; a server in the
// cluster would put them behind its own authentication and give each
// request the caller's identity (docs/architecture.md).
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Actions are what the page may do; each is done with the user's
// credentials, so RBAC decides, not the dashboard.
type Actions interface {
	// Trigger starts suite with params the same way `kubectl devloop
	// trigger --no-follow` does and returns the annotation value written.
	Trigger(ctx context.Context, namespace, env, suite string, params map[string]string) (string, error)
	// Cancel cancels the suite's running run.
	Cancel(ctx context.Context, namespace, env, suite string) (string, error)
	// Component brings an on-demand component up or down, or turns debug
	// mode of COMPONENT[/IMAGE] on or off, as `kubectl devloop up|down|
	// debug --no-forward` do, or (rebuild) requests a reconcile as
	// `kubectl devloop push` does; it returns the annotation's new value.
	Component(ctx context.Context, namespace, env, target, action string) (string, error)
	// Logs streams the target's log lines to emit until ctx ends (follow)
	// or the log ends.
	Logs(ctx context.Context, namespace, env string, t LogTarget, emit func(LogLine)) error
	// Endpoints lists the Service ports in front of a component's pods
	// that the spec declares no port for (Endpoint).
	Endpoints(ctx context.Context, namespace, env, component string) ([]Endpoint, error)
	// Values reads a Helm component's values as the operator passed
	// them (HelmValues).
	Values(ctx context.Context, namespace, env, component string) (HelmValues, error)
	// Objects reads the objects the component applied (its status
	// inventory; at most MaxObjects) and computes each one's kstatus;
	// left is how many more the inventory lists.
	Objects(ctx context.Context, namespace, env, component string) (objs []ObjectStatus, left int, err error)
}

// Handlers serve the dashboard: the page, its assets, the live stream of
// the store, logs and actions.
type Handlers struct {
	Store   *Store
	Actions Actions
	// Scope is shown on the page.
	Scope Scope
	// Forwards are the port-forwards started from the page; nil: the page
	// cannot start any.
	Forwards *Forwards

	once sync.Mutex
	done map[string]actionResult
	fifo []string
}

type actionResult struct {
	Status int    `json:"-"`
	Value  string `json:"value,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Handler is the mux of every route.
func (h *Handlers) Handler() http.Handler {
	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		f, err := static.Open("index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.Copy(w, f)
	})
	mux.HandleFunc("GET /api/session", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"namespace": h.Scope.Namespace, "selector": h.Scope.Selector})
	})
	mux.HandleFunc("GET /api/stream", h.stream)
	mux.HandleFunc("GET /api/logs", h.logs)
	mux.HandleFunc("POST /api/trigger", h.trigger)
	mux.HandleFunc("POST /api/cancel", h.cancel)
	mux.HandleFunc("POST /api/component", h.component)
	mux.HandleFunc("GET /api/objects", h.objects)
	mux.HandleFunc("GET /api/values", h.values)
	mux.HandleFunc("GET /api/endpoints", h.endpoints)
	mux.HandleFunc("GET /api/portforwards", h.listForwards)
	mux.HandleFunc("POST /api/portforward", h.portForward)
	return mux
}

// stream sends the store's snapshot, then every change, as server-sent
// events; a comment every 15 s keeps proxies from closing it.
func (h *Handlers) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	snapshot, changes, cancel := h.Store.Subscribe()
	defer cancel()
	for _, u := range snapshot {
		writeEvent(w, "update", u)
	}
	writeEvent(w, "synced", map[string]bool{"ok": true})
	fl.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			_, _ = io.WriteString(w, ": keep-alive\n\n")
			fl.Flush()
		case u, ok := <-changes:
			if !ok {
				// Fell behind: the page reconnects and starts over.
				return
			}
			writeEvent(w, "update", u)
			// Send what queued meanwhile in the same flush.
			for more := true; more; {
				select {
				case u, ok := <-changes:
					if !ok {
						return
					}
					writeEvent(w, "update", u)
				default:
					more = false
				}
			}
			fl.Flush()
		}
	}
}

func writeEvent(w io.Writer, name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = io.WriteString(w, "event: "+name+"\ndata: ")
	_, _ = w.Write(data)
	_, _ = io.WriteString(w, "\n\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// actionRequest is the body of a trigger or cancel.
type actionRequest struct {
	Namespace string `json:"namespace"`
	Env       string `json:"env"`
	Suite     string `json:"suite,omitempty"`
	// Component and Action are a component action's: up, down, debug-on,
	// debug-off.
	Component string `json:"component,omitempty"`
	Action    string `json:"action,omitempty"`
	// Port is a port-forward's: components[].ports[].name.
	Port   string            `json:"port,omitempty"`
	Params map[string]string `json:"params,omitempty"`
	// RequestID is made by the page per click: a retried request (a
	// double submit, a network retry) gets the first answer and does not
	// trigger again.
	RequestID string `json:"requestId"`
}

// maxActionBody bounds what is read of an action's body.
const maxActionBody = 16 << 10

// maxRemembered bounds the request IDs kept for deduplication.
const maxRemembered = 256

func (h *Handlers) trigger(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, a actionRequest) (string, error) {
		return h.Actions.Trigger(ctx, a.Namespace, a.Env, a.Suite, a.Params)
	})
}

func (h *Handlers) cancel(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, a actionRequest) (string, error) {
		return h.Actions.Cancel(ctx, a.Namespace, a.Env, a.Suite)
	})
}

func (h *Handlers) component(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, a actionRequest) (string, error) {
		switch a.Action {
		case "up", "down", "debug-on", "debug-off", "rebuild":
		default:
			return "", errors.New("action: want up, down, debug-on, debug-off or rebuild")
		}
		if a.Component == "" {
			return "", errors.New("component is required")
		}
		return h.Actions.Component(ctx, a.Namespace, a.Env, a.Component, a.Action)
	})
}

func (h *Handlers) act(w http.ResponseWriter, r *http.Request, do func(context.Context, actionRequest) (string, error)) {
	var a actionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxActionBody)).Decode(&a); err != nil {
		writeJSON(w, http.StatusBadRequest, actionResult{Error: "bad request body: " + bounded(err.Error(), 200)})
		return
	}
	if a.Namespace == "" || a.Env == "" || (a.Suite == "" && a.Component == "") || a.RequestID == "" || len(a.RequestID) > 64 {
		writeJSON(w, http.StatusBadRequest, actionResult{Error: "namespace, env, suite or component, and requestId (at most 64 characters) are required"})
		return
	}
	// One request ID is done once: hold the lock across the action so a
	// second copy arriving meanwhile waits for the first one's answer.
	h.once.Lock()
	defer h.once.Unlock()
	if res, ok := h.done[a.RequestID]; ok {
		writeJSON(w, res.Status, res)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	value, err := do(ctx, a)
	res := actionResult{Status: http.StatusOK, Value: value}
	if err != nil {
		res = actionResult{Status: http.StatusUnprocessableEntity, Error: bounded(err.Error(), 1024)}
	}
	h.remember(a.RequestID, res)
	writeJSON(w, res.Status, res)
}

// remember keeps the answer to a request ID; h.once is held.
func (h *Handlers) remember(id string, res actionResult) {
	if h.done == nil {
		h.done = map[string]actionResult{}
	}
	h.done[id] = res
	h.fifo = append(h.fifo, id)
	if len(h.fifo) > maxRemembered {
		delete(h.done, h.fifo[0])
		h.fifo = h.fifo[1:]
	}
}
