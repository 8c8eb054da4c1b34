package teamcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/devloop-dev/devloop/internal/httpserve"
)

// Client is a builder pod's side of the service: it presents the pod's
// projected token (re-read on each request: the kubelet rotates it).
type Client struct {
	// URL is the service's base URL (https://HOST:PORT).
	URL string
	// CA is the PEM bundle the service's certificate is checked against
	// (when HTTP is nil).
	CA []byte
	// TokenFile is the projected ServiceAccount token of the cache's
	// audience.
	TokenFile string
	HTTP      *http.Client

	once  sync.Once
	caErr error
}

func (c *Client) request(ctx context.Context, method string, action []byte, body io.Reader) (*http.Request, error) {
	if c.http(); c.caErr != nil {
		return nil, c.caErr
	}
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+actionsPath+hex.EncodeToString(action), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	return req, nil
}

func (c *Client) http() *http.Client {
	c.once.Do(func() {
		if c.HTTP != nil {
			return
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if len(c.CA) > 0 {
			cfg, err := httpserve.ClientTLS(c.CA)
			if err != nil {
				c.caErr = err
				return
			}
			tr.TLSClientConfig = cfg
		}
		c.HTTP = &http.Client{Timeout: 5 * time.Minute, Transport: tr}
	})
	return c.HTTP
}

// Get fetches the entry for action into w: its output ID and the
// environment it came from, miss true when no environment the pod may
// read has it. The body is checked against the output ID before Get
// returns; w must be discarded on an error.
func (c *Client) Get(ctx context.Context, action []byte, w io.Writer) (output []byte, from string, miss bool, err error) {
	req, err := c.request(ctx, http.MethodGet, action, nil)
	if err != nil {
		return nil, "", false, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, "", false, err
	}
	defer func() { _ = resp.Body.Close() }()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, "", true, nil
	default:
		return nil, "", false, statusError(resp)
	}
	output, err = hex.DecodeString(resp.Header.Get(HeaderOutputID))
	if err != nil || len(output) != IDLen {
		return nil, "", false, fmt.Errorf("the cache answered no valid output ID")
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), resp.Body); err != nil {
		return nil, "", false, err
	}
	// The service checked it too; a body that does not match is never
	// handed to the go command.
	if !bytes.Equal(h.Sum(nil), output) {
		return nil, "", false, ErrCorrupt
	}
	return output, resp.Header.Get(HeaderFrom), false, nil
}

// Put stores body (size bytes) as the pod's environment's entry for
// action.
func (c *Client) Put(ctx context.Context, action, output []byte, body io.Reader, size int64) error {
	req, err := c.request(ctx, http.MethodPut, action, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set(HeaderOutputID, hex.EncodeToString(output))
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusNoContent {
		return statusError(resp)
	}
	return nil
}

// StatusError is an answer of the service other than the protocol's.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("build cache: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// refusedEntry says the service refused this one entry (too large, not
// matching its ID, its namespace's share or uploads busy), not the
// caller nor every request.
func (e *StatusError) refusedEntry() bool {
	return e.Code == http.StatusBadRequest || e.Code == http.StatusRequestEntityTooLarge || e.Code == http.StatusTooManyRequests
}

func statusError(resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	return &StatusError{Code: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
}
