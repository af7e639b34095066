package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"partita.dev/partita/internal/api"
)

// apiError is the API's answer to a call that failed: its status, its
// message and the request field it names.
type apiError struct {
	Status int
	Msg    string
	Field  string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Msg) }

// recorder collects the API handler's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// raw sends one request to the API's handler in-process, with token as
// its bearer token, and returns the answer; a status of 400 or more is
// an *apiError.
func (p *Portal) raw(ctx context.Context, token, method, path string, body any) (*recorder, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	req.RemoteAddr = "portal"
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	p.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 400 {
		var e api.Error
		if err := json.Unmarshal(rec.body.Bytes(), &e); err != nil || e.Error == "" {
			e.Error = strings.TrimSpace(rec.body.String())
		}
		return rec, &apiError{Status: rec.status, Msg: e.Error, Field: e.Field}
	}
	return rec, nil
}

// call is raw with a JSON answer decoded into out (when not nil).
func (p *Portal) call(ctx context.Context, token, method, path string, body, out any) error {
	rec, err := p.raw(ctx, token, method, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// as is call with the session's token.
func (p *Portal) as(r *http.Request, s *session, method, path string, body, out any) error {
	return p.call(r.Context(), s.token, method, path, body, out)
}
