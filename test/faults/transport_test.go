package faults

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault is a kind of failure the transport injects.
type Fault string

const (
	// Conflict answers a write with 409, as a stale resourceVersion does.
	Conflict Fault = "409"
	// Throttled answers 429 with Retry-After: 1, as priority and fairness
	// does when the manager's share is spent.
	Throttled Fault = "429"
	// ServerError answers 500 without reaching the apiserver.
	ServerError Fault = "500"
	// LostAnswer lets a write through to the apiserver and answers 500:
	// the write was made, the manager does not know it.
	LostAnswer Fault = "500 after the write"
	// Slow holds a request back before sending it on.
	Slow Fault = "slow"
	// DroppedWatch ends a watch stream a few seconds after it opened.
	DroppedWatch Fault = "dropped watch"
)

// faultRates say how often each fault strikes a request it applies to.
type faultRates struct {
	// Conflict and LostAnswer apply to writes; Throttled, ServerError and
	// Slow to every request but watches; DroppedWatch to watches.
	conflict, throttled, serverError, lostAnswer, slow, droppedWatch float64
	// slowBy is the most a slow request is held back.
	slowBy time.Duration
}

// faultyTransport injects faults into the manager's requests at set rates,
// from a seeded source, and counts the requests by verb and the faults by
// kind. Leader election's requests pass untouched (the test runs one
// manager, without it), and so does discovery.
type faultyTransport struct {
	next  http.RoundTripper
	rates faultRates

	mu       sync.Mutex
	rand     *rand.Rand
	requests map[string]int
	faults   map[Fault]int
	// podWrites counts the writes to pods that reached the apiserver.
	podWrites int
	// watched: a watch was drawn for. The first is always dropped, so
	// that a run whose watches the rate happens to spare still exercises
	// the manager's recovery from one.
	watched bool
}

func newFaultyTransport(next http.RoundTripper, r *rand.Rand, rates faultRates) *faultyTransport {
	return &faultyTransport{next: next, rates: rates, rand: r, requests: map[string]int{}, faults: map[Fault]int{}}
}

// verb names a request as an apiserver's audit log does, near enough: a
// GET with watch=true is a watch.
func verb(req *http.Request) string {
	if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
		return "WATCH"
	}
	return req.Method
}

func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// discovery reports whether req asks which groups, versions or resources
// the apiserver serves. The manager asks while it is being built; a failure
// there ends its process, for its Deployment to start again, which is not
// what these tests measure.
func discovery(req *http.Request) bool {
	path := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch path[0] {
	case "api":
		return len(path) <= 2
	case "apis":
		return len(path) <= 3
	}
	return false
}

// draw decides which fault strikes req, if any, and counts it.
func (t *faultyTransport) draw(req *http.Request) (Fault, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := verb(req)
	t.requests[v]++
	if strings.Contains(req.URL.Path, "/leases/") || discovery(req) {
		return "", 0
	}
	hit := func(rate float64) bool { return t.rand.Float64() < rate }
	var f Fault
	switch {
	case v == "WATCH":
		if !t.watched || hit(t.rates.droppedWatch) {
			f = DroppedWatch
		}
		t.watched = true
	case isWrite(req) && hit(t.rates.conflict):
		f = Conflict
	case isWrite(req) && hit(t.rates.lostAnswer):
		f = LostAnswer
	case hit(t.rates.throttled):
		f = Throttled
	case hit(t.rates.serverError):
		f = ServerError
	case hit(t.rates.slow):
		f = Slow
	}
	var d time.Duration
	switch f {
	case Slow:
		d = time.Duration(t.rand.Int64N(int64(t.rates.slowBy)))
	case DroppedWatch:
		d = time.Second + time.Duration(t.rand.Int64N(int64(4*time.Second)))
	}
	if f != "" {
		t.faults[f]++
	}
	return f, d
}

func (t *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f, d := t.draw(req)
	switch f {
	case Conflict:
		return statusResponse(req, http.StatusConflict, "Conflict", nil), nil
	case Throttled:
		return statusResponse(req, http.StatusTooManyRequests, "TooManyRequests", http.Header{"Retry-After": {"1"}}), nil
	case ServerError:
		return statusResponse(req, http.StatusInternalServerError, "InternalError", nil), nil
	case Slow:
		select {
		case <-time.After(d):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if isWrite(req) && strings.Contains(req.URL.Path, "/pods/") && resp.StatusCode < 300 {
		t.mu.Lock()
		t.podWrites++
		t.mu.Unlock()
	}
	switch f {
	case LostAnswer:
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return statusResponse(req, http.StatusInternalServerError, "InternalError", nil), nil
	case DroppedWatch:
		// Closing the body under the reader ends the stream with an
		// error, as a connection the network dropped does.
		body := resp.Body
		time.AfterFunc(d, func() { _ = body.Close() })
	}
	return resp, nil
}

// statusResponse is the apiserver's answer of a failure with code.
func statusResponse(req *http.Request, code int, reason string, h http.Header) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected fault: %s","reason":%q,"code":%d}`,
		reason, reason, code)
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return &http.Response{
		StatusCode:    code,
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewBufferString(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// counts returns the requests by verb, the faults by kind, and the pod
// writes that reached the apiserver.
func (t *faultyTransport) counts() (map[string]int, map[Fault]int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.requests), maps.Clone(t.faults), t.podWrites
}
