package portal_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// formErrorFields are the submit form's places for an error (the same
// list as fuzz_test.go's, which checks them against the template).
var formErrorFields = []string{"team", "project", "class", "name", "image", "command", "gpu", "gpu_mode", "gpu_memory", "gpu_compute",
	"gpu_mig", "gpu_count", "gpu_profile", "tasks", "gang", "cpu", "memory", "duration", "checkpoint_every"}

var previewError = regexp.MustCompile(`<li data-field="([^"]*)">([^<]*)</li>`)

// FuzzSubmitPreview sends the submit form, as a team lead types it, to
// the live preview: the portal's own checks, then the API's (durations,
// memory and CPU quantities, counts, classes, profiles) on the real
// server. The preview never fails, and every rejection sits beside the
// field it is about.
func FuzzSubmitPreview(f *testing.F) {
	e := newEnv(f)
	c, _, _ := e.signInHTTP("lead-s", "")
	for _, s := range [][]string{
		// team, kind, gpu_mode, gpu_count, gpu_mig, gpu_memory, gpu_compute, gpu_profile, tasks, gang, cpu, memory, duration, checkpoint_every, class, image
		{"search", "inference", "memory", "", "", "20Gi", "0.25", "", "1", "0", "", "", "2h", "", "batch", ""},
		{"search", "training", "count", "4", "", "", "", "", "2", "2", "16", "128Gi", "10h", "30m", "batch", "registry.example/trainer:1.4"},
		{"search", "inference", "mig", "", "3g.40gb", "", "", "", "2", "", "500m", "8Gi", "90m", "", "production", ""},
		{"search", "inference", "profile", "", "", "", "", "llm-7b-bf16", "3", "0", "", "", "10h", "", "production", ""},
		{"search", "training", "none", "", "", "", "", "", "1", "", "1", "1Gi", "1h", "", "best-effort", ""},
		{"research", "inference", "count", "1", "", "", "", "", "1", "0", "", "", "1h", "", "batch", ""},
		{"", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""},
		{"search", "inference", "memory", "", "", "20GB", "2", "", "0", "5", "-1", "1.5Qi", "forever", "-30m", "urgent", "a b"},
		{"search", "inference", "memory", "", "", "0.1Mi", "", "", "1", "0", "1e400", "9999999Ti", "9999999h", "1ns", "batch", ""},
		{"search", "training", "count", "9", "", "", "", "", "10001", "10001", "", "", "2h", "", "batch", ""},
		{"search", "inference", "mig", "", "9g.999gb", "", "", "", "1", "", "", "", "", "", "", ""},
		{"search", "inference", "profile", "", "", "", "", "no-such-profile", "1", "", "", "", "", "", "", ""},
		{"nosuchteam", "inference", "count", "64", "", "", "", "", "1", "", "", "", "", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15])
	}
	f.Fuzz(func(t *testing.T, team, kind, mode, count, mig, memory, compute, profile, tasks, gang, cpu, mem, duration, checkpoint, class, image string) {
		q := url.Values{"team": {team}, "project": {"default"}, "kind": {kind}, "gpu_mode": {mode}, "gpu_count": {count}, "gpu_mig": {mig},
			"gpu_memory": {memory}, "gpu_compute": {compute}, "gpu_profile": {profile}, "tasks": {tasks}, "gang": {gang}, "cpu": {cpu},
			"memory": {mem}, "duration": {duration}, "checkpoint_every": {checkpoint}, "class": {class}, "image": {image}}
		resp, err := c.Get(e.url + "/submit/preview?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(data)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /submit/preview?%s: %d\n%.600s", q.Encode(), resp.StatusCode, body)
		}
		errs := previewError.FindAllStringSubmatch(body, -1)
		if len(errs) == 0 && !strings.Contains(body, "Each task asks for") {
			t.Fatalf("the preview shows neither an error nor a choice:\n%.600s", body)
		}
		for _, m := range errs {
			field, msg := m[1], html.UnescapeString(m[2])
			if !slices.Contains(formErrorFields, field) {
				t.Errorf("the error %q is under %q, which is no field of the form (query %s)", msg, field, q.Encode())
			}
			if strings.TrimSpace(msg) == "" {
				t.Errorf("an empty error under %q", field)
			}
		}
	})
}

// TestPreviewPutsEachRejectionBesideItsField changes one field of a good
// submission at a time to something wrong: the preview shows one error,
// beside that field, quoting what was typed.
func TestPreviewPutsEachRejectionBesideItsField(t *testing.T) {
	e := newEnv(t)
	c, _, _ := e.signInHTTP("lead-s", "")
	good := url.Values{"team": {"search"}, "project": {"default"}, "kind": {"training"}, "class": {"batch"}, "gpu_mode": {"count"}, "gpu_count": {"1"},
		"tasks": {"2"}, "gang": {"2"}, "cpu": {"4"}, "memory": {"16Gi"}, "duration": {"2h"}, "checkpoint_every": {"30m"}}
	preview := func(q url.Values) [][]string {
		resp, err := c.Get(e.url + "/submit/preview?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("preview %s: %d", q.Encode(), resp.StatusCode)
		}
		return previewError.FindAllStringSubmatch(string(data), -1)
	}
	if errs := preview(good); len(errs) != 0 {
		t.Fatalf("the good submission is refused: %q", errs)
	}
	for _, c := range []struct {
		field, value string
		also         url.Values
	}{
		{field: "duration", value: "forever"},
		{field: "duration", value: "0s"},
		{field: "checkpoint_every", value: "-30m"},
		{field: "memory", value: "1.5Qi"},
		{field: "memory", value: "16GB"},
		{field: "cpu", value: "lots"},
		{field: "tasks", value: "two"},
		{field: "tasks", value: "-2"},
		{field: "gang", value: "3"},
		{field: "gpu_count", value: "0"},
		{field: "gpu_count", value: "1.5"},
		{field: "gpu_count", value: "999"},
		{field: "gpu_memory", value: "20GB", also: url.Values{"gpu_mode": {"memory"}}},
		{field: "gpu_compute", value: "2", also: url.Values{"gpu_mode": {"memory"}, "gpu_memory": {"20Gi"}}},
		{field: "gpu_compute", value: "NaN", also: url.Values{"gpu_mode": {"memory"}, "gpu_memory": {"20Gi"}}},
		{field: "gpu_mig", value: "9g.999gb", also: url.Values{"gpu_mode": {"mig"}}},
		{field: "gpu_profile", value: "no-such-profile", also: url.Values{"gpu_mode": {"profile"}}},
		{field: "gpu_mode", value: "lots"},
		{field: "class", value: "urgent"},
		{field: "image", value: "a b"},
		{field: "project", value: "nope"},
		{field: "team", value: "research"},
	} {
		q := url.Values{}
		for k, v := range good {
			q[k] = v
		}
		for k, v := range c.also {
			q[k] = v
		}
		q.Set(c.field, c.value)
		errs := preview(q)
		if len(errs) != 1 || errs[0][1] != c.field {
			t.Errorf("%s=%q: errors %q; want one, beside %s", c.field, c.value, errs, c.field)
			continue
		}
		if msg := html.UnescapeString(errs[0][2]); c.field != "gpu_mode" && !strings.Contains(msg, c.value) {
			t.Errorf("%s=%q: the error %q does not say what was typed", c.field, c.value, msg)
		}
	}
}
