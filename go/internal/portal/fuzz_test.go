package portal

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz tests of the portal's parsers of user input: the submit form, the
// chargeback period and the redirect target after sign-in or an action.
// None may panic; a rejection names the field it is about. (The API
// parses what the portal passes on as text, durations and memory
// quantities: FuzzSubmitPreview sends the form through it.)

// formErrorFields are the submit form's places for an error, beside each
// field ("gpu" is the GPU fieldset as a whole).
var formErrorFields = []string{"team", "project", "class", "name", "image", "command", "gpu", "gpu_mode", "gpu_memory", "gpu_compute",
	"gpu_mig", "gpu_count", "gpu_profile", "tasks", "gang", "cpu", "memory", "duration", "checkpoint_every"}

// TestEveryFormErrorHasAPlace: each of formErrorFields is shown beside
// its field in the template, and every field the API names in a
// submission's error maps to one of them.
func TestEveryFormErrorHasAPlace(t *testing.T) {
	html, err := os.ReadFile("templates/submit.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range formErrorFields {
		if !strings.Contains(string(html), `{{with index $e "`+f+`"}}<p class="ferr" data-for="`+f+`">`) {
			t.Errorf("templates/submit.html shows no error beside %s", f)
		}
	}
	// The fields of api.SubmitRequest that the API names in a 400 (see
	// internal/server/jobspec.go); fail_after, gpu.milli and
	// gpu.models are not on the form.
	for _, apiField := range []string{"team", "project", "name", "image", "command", "class", "tasks", "replicas", "gang", "cpu", "memory",
		"duration", "checkpoint_every", "idempotency_key", "gpu", "gpu.count", "gpu.mig", "gpu.memory", "gpu.compute", "gpu.profile"} {
		got := formField(apiField)
		if apiField == "idempotency_key" {
			continue // hidden; a fresh key comes with every rendering
		}
		if !contains(formErrorFields, got) {
			t.Errorf("formField(%q) = %q, not a place on the form", apiField, got)
		}
	}
}

// formRequest is a POST of the submit form with these values.
func formRequest(v url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/submit", strings.NewReader(v.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

func FuzzSubmitForm(f *testing.F) {
	for _, s := range [][]string{
		// kind, gpu_mode, gpu_count, gpu_mig, gpu_memory, gpu_compute, gpu_profile, tasks, gang, cpu, memory, duration, checkpoint_every
		{"inference", "memory", "1", "", "20Gi", "0.25", "", "1", "0", "", "", "2h", ""},
		{"training", "count", "8", "", "", "", "", "3", "3", "16", "128Gi", "10h", "30m"},
		{"inference", "mig", "", "1g.10gb", "", "", "", "2", "", "500m", "8Gi", "90m", ""},
		{"inference", "profile", "", "", "", "", "llm-7b-bf16", "3", "0", "", "", "10h", ""},
		{"training", "none", "", "", "", "", "", "", "", "1", "1Gi", "1h", ""},
		{"", "", "", "", "", "", "", "", "", "", "", "", ""},
		{"training", "count", "0", "", "", "", "", "-1", "x", "", "", "forever", "-5m"},
		{"inference", "count", "99999999999999999999", "", "", "", "", "1e3", "0x10", "", "", "", ""},
		{"inference", "memory", "", "", "1.5Ti", "NaN", "", "1", "0", "", "", "", ""},
		{"inference", "memory", "", "", "20Gi", "+Inf", "", "1", "0", "", "", "", ""},
		{"inference", "memory", "", "", "20Gi", "1.0000001", "", " 1 ", "0", "", "", "", ""},
		{"inference", "memory", "", "", "", "-0", "", "١", "٠", "", "", "", ""},
		{"x", "GPU", "1", "7g.80gb", "20Gi", "0.5", "p", "1", "1", "1", "1Gi", "1h", "1h"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12])
	}
	f.Fuzz(func(t *testing.T, kind, mode, count, mig, memory, compute, profile, tasks, gang, cpu, mem, duration, checkpoint string) {
		v := url.Values{"kind": {kind}, "team": {"search"}, "project": {"default"}, "gpu_mode": {mode}, "gpu_count": {count}, "gpu_mig": {mig},
			"gpu_memory": {memory}, "gpu_compute": {compute}, "gpu_profile": {profile}, "tasks": {tasks}, "gang": {gang}, "cpu": {cpu},
			"memory": {mem}, "duration": {duration}, "checkpoint_every": {checkpoint}}
		form := readForm(formRequest(v))
		req, errs := form.request()
		for field, msg := range errs {
			if !contains(formErrorFields, field) {
				t.Errorf("error %q under %q, which is no place on the form", msg, field)
			}
			if msg == "" {
				t.Errorf("an empty error under %s", field)
			}
		}
		// Whatever passes goes to the API as JSON, so it must encode.
		if len(errs) == 0 {
			if _, err := json.Marshal(req); err != nil {
				t.Fatalf("the request %+v does not encode: %v", req, err)
			}
		}
		// A number that was accepted is the number typed.
		if _, bad := errs["tasks"]; !bad {
			n := req.Replicas
			if form.Kind == "training" {
				n = req.Tasks
			}
			if want, err := strconv.Atoi(form.Tasks); form.Tasks != "" && (err != nil || want != n) {
				t.Errorf("tasks %q became %d", form.Tasks, n)
			}
		}
		if _, bad := errs["gpu_compute"]; !bad && form.GPUMode == "memory" && !(req.GPU.Compute >= 0 && req.GPU.Compute <= 1) {
			t.Errorf("gpu_compute %q became %v", form.GPUCompute, req.GPU.Compute)
		}
		if _, bad := errs["gpu_count"]; !bad && form.GPUMode == "count" && req.GPU.Count <= 0 {
			t.Errorf("gpu_count %q became %d", form.GPUCount, req.GPU.Count)
		}
	})
}

var periodError = regexp.MustCompile(`^(from|to): ".*" is not a time`)

func FuzzChargebackPeriod(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"2026-03-01T00:00:00", "2026-03-08T00:00:00"}, {"2026-03-01T00:00", "2026-03-01T12:30"},
		{"2026-03-01T00:00:00Z", "2026-03-01T00:00:00+05:30"}, {"2026-03-01T00:00:00.999999999Z", ""},
		{"0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59"}, {"0001-01-01T00:00:00Z", ""},
		{"yesterday", "now"}, {"2026-02-30T00:00:00", "2026-13-01T00:00"}, {"", "0001-01-01T00:00:00Z"},
	} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("x", 3600))
	f.Fuzz(func(t *testing.T, from, to string) {
		q := url.Values{"from": {from}, "to": {to}}
		a, b, err := parsePeriod(now, q)
		if err != nil {
			m := periodError.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("the error %q names no field", err)
			}
			if q.Get(m[1]) == "" {
				t.Errorf("the error %q names %s, which was not given", err, m[1])
			}
			if !utf8.ValidString(err.Error()) {
				t.Errorf("the error %q is not UTF-8", err)
			}
			return
		}
		for _, x := range []time.Time{a, b} {
			if x.Location() != time.UTC || x.Nanosecond() != 0 {
				t.Errorf("%v: want UTC, whole seconds", x)
			}
		}
		// The CSV link and the form's fields give the same period back.
		a2, b2, err := parsePeriod(now, reportQuery(a, b, []string{"team"}, ""))
		if err != nil || !a2.Equal(a) || !b2.Equal(b) {
			t.Errorf("the CSV link's period %v to %v (%v); the page's %v to %v", a2, b2, err, a, b)
		}
		a3, b3, err := parsePeriod(now, url.Values{"from": {a.Format(localTime)}, "to": {b.Format(localTime)}})
		if err != nil || !a3.Equal(a) || !b3.Equal(b) {
			t.Errorf("the form's period %v to %v (%v); the page's %v to %v", a3, b3, err, a, b)
		}
	})
}

// landsOnThisSite says whether a browser that follows Location loc from
// https://portal.example/x stays there: it drops tabs and newlines,
// trims C0 controls and spaces and reads "\" as "/".
func landsOnThisSite(loc string) bool {
	base, _ := url.Parse("https://portal.example/x")
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	u, err := url.Parse(loc)
	if err != nil {
		return false
	}
	u = base.ResolveReference(u)
	return u.Scheme == "https" && u.Host == "portal.example" && u.User == nil
}

func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"", "/", "/queue?team=search", "/jobs/job-0123456789abcdef", "//evil.example", "https://evil.example",
		`/\evil.example`, "/\t/evil.example", " //evil.example", "/%2F%2Fevil.example", "javascript:alert(1)", "/\x00", "/ü", "/a b",
		"/.//evil.example", "/..//evil.example", "///evil.example", "/?next=//evil.example", "/#//evil.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != "/" && got != next {
			t.Errorf("safeNext(%q) = %q: it keeps a target or replaces it with /", next, got)
		}
		if !landsOnThisSite(got) {
			t.Errorf("safeNext(%q) = %q leads a browser off the site", next, got)
		}
		// http.Redirect cleans the path; the result must stay here too.
		w := httptest.NewRecorder()
		http.Redirect(w, httptest.NewRequest(http.MethodGet, "/signin", nil), got, http.StatusSeeOther)
		if loc := w.Header().Get("Location"); !landsOnThisSite(loc) {
			t.Errorf("safeNext(%q) = %q: Location %q leads a browser off the site", next, got, loc)
		}
	})
}
