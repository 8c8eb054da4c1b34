package ownwrites

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Client is a cached client whose reads of a DevEnvironment are never
// older than this process's last write of it (spec, metadata or
// status): when the cache holds another version than the one written
// last, the environment is read from the API server instead.
// resourceVersions do not say which of two versions is newer, so that
// read also finds a cache that is current with someone else's later
// write; the record is then dropped, and the cache is read again as is.
// Everything else goes to the wrapped client unchanged.
type Client struct {
	client.Client
	// Live reads from the API server.
	Live client.Reader

	mu sync.Mutex
	// written is the resourceVersion of the last write, by environment.
	written map[types.UID]string
}

// New wraps cached (the manager's client); live reads from the API
// server (the manager's API reader).
func New(cached client.Client, live client.Reader) *Client {
	return &Client{Client: cached, Live: live, written: map[types.UID]string{}}
}

// Get reads obj from the cache, or, for an environment the cache has
// not caught up with, from the API server.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	env, ok := obj.(*v1alpha1.DevEnvironment)
	if !ok {
		return nil
	}
	last, ok := c.lastWrite(env.UID)
	if !ok || last == env.ResourceVersion {
		return nil
	}
	cached := env.ResourceVersion
	if err := c.Live.Get(ctx, key, env, opts...); err != nil {
		return err
	}
	if env.ResourceVersion == cached {
		// The cache is current: someone wrote after this process.
		c.forget(env.UID)
	}
	return nil
}

// Update writes obj and records the version written.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.wrote(obj, err)
	return err
}

// Patch writes obj and records the version written.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.wrote(obj, err)
	return err
}

// Status is the status writer, recording the versions it writes.
func (c *Client) Status() client.SubResourceWriter {
	return statusWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type statusWriter struct {
	client.SubResourceWriter
	c *Client
}

func (w statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := w.SubResourceWriter.Update(ctx, obj, opts...)
	w.c.wrote(obj, err)
	return err
}

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	w.c.wrote(obj, err)
	return err
}

// wrote records the version of an environment a write returned.
func (c *Client) wrote(obj client.Object, err error) {
	env, ok := obj.(*v1alpha1.DevEnvironment)
	if !ok || err != nil || env.UID == "" || env.ResourceVersion == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !env.DeletionTimestamp.IsZero() && len(env.Finalizers) == 0 {
		// Its last write: the environment is gone.
		delete(c.written, env.UID)
		return
	}
	c.written[env.UID] = env.ResourceVersion
}

func (c *Client) lastWrite(uid types.UID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv, ok := c.written[uid]
	return rv, ok
}

func (c *Client) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.written, uid)
}
