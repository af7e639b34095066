// Package client is a small client of Partita's HTTP API, for the CLI
// commands and the load generator.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
)

// Client talks to one server with one token.
type Client struct {
	Base  string // "http://127.0.0.1:8080"
	Token string
	HTTP  *http.Client
}

// Error is an API error answer.
type Error struct {
	Status  int
	Message string
	Field   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// DefaultServer and DefaultTokenFile are where the CLI looks when no flag
// or environment variable says otherwise.
const (
	DefaultServer    = "http://127.0.0.1:8080"
	DefaultTokenFile = "partita-data/admin.token"
)

// Resolve picks the server and token: flags first, then $PARTITA_SERVER
// and $PARTITA_TOKEN, then the defaults (the token in
// ./partita-data/admin.token).
func Resolve(server, token string) (*Client, error) {
	if server == "" {
		server = os.Getenv("PARTITA_SERVER")
	}
	if server == "" {
		server = DefaultServer
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	if token == "" {
		token = os.Getenv("PARTITA_TOKEN")
	}
	if token == "" {
		b, err := os.ReadFile(DefaultTokenFile)
		if err != nil {
			return nil, errors.New("no token: pass --token, set PARTITA_TOKEN, or run where ./partita-data/admin.token is")
		}
		token = strings.TrimSpace(string(b))
	}
	return &Client{Base: strings.TrimRight(server, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Do sends a JSON request (body may be nil) and decodes a JSON answer into
// out (may be nil). headers are extra request headers, name then value.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, headers ...string) error {
	data, status, err := c.send(ctx, method, path, body, headers...)
	if err != nil {
		return err
	}
	if out != nil && status != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}

// Raw sends a GET and returns the body as it is (CSV reports).
func (c *Client) Raw(ctx context.Context, path string) ([]byte, error) {
	data, _, err := c.send(ctx, "GET", path, nil)
	return data, err
}

func (c *Client) send(ctx context.Context, method, path string, body any, headers ...string) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		var ae api.Error
		if json.Unmarshal(data, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(data))
		}
		return nil, resp.StatusCode, &Error{Status: resp.StatusCode, Message: ae.Error, Field: ae.Field}
	}
	return data, resp.StatusCode, nil
}
