package portal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"partita.dev/partita/internal/api"
)

// The browser tests drive Debian's headless Chromium with chromedp. They
// skip when no Chromium is installed, except under CI (the CI variable
// set, as CI services and .ci/run set it), where a missing browser fails
// them: .ci/run installs it, and CI must not pass without running them.
// PARTITA_SCREENSHOTS=1 also saves the main pages to docs/screenshots/.

// findChromium returns the browser's path, or "".
func findChromium() string {
	if p := os.Getenv("PARTITA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserCtx starts one headless Chromium for the test; each user gets a
// tab in a browser context of its own (its own cookies).
func browserCtx(t *testing.T) context.Context {
	t.Helper()
	path := findChromium()
	if path == "" {
		const msg = "no Chromium found (apt-get install chromium, or set PARTITA_CHROMIUM); .ci/run installs it"
		if ci := os.Getenv("CI"); ci != "" && ci != "0" && !strings.EqualFold(ci, "false") {
			t.Fatal(msg + "; CI is set, so the browser test fails rather than skip")
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// tab is one user's tab.
type tab struct {
	t    testing.TB
	ctx  context.Context
	base string
	user string
}

func (e *env) tab(bctx context.Context, user string) *tab {
	e.t.Helper()
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	e.t.Cleanup(cancel)
	tb := &tab{t: e.t, ctx: ctx, base: e.url, user: user}
	// The first call opens the tab and binds it to its context: no
	// deadline on that one.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 900)); err != nil {
		e.t.Fatalf("open a tab for %s: %v", user, err)
	}
	return tb
}

// do runs actions with a deadline, so that a page that never shows what
// is awaited fails the test instead of hanging it.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v (page %s)", tb.user, err, tb.location())
	}
}

func (tb *tab) location() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

// open loads a page and waits until it has loaded.
func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(tb.base + path))
}

// submitBy clicks a button that submits a form and waits for the page
// that answers.
func (tb *tab) submitBy(sel string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		tb.t.Fatalf("%s: submit with %s: %v (page %s)", tb.user, sel, err, tb.location())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, js string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		tb.t.Fatalf("%s: %s: %v", tb.user, js, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true. A navigation in
// the meantime (a form posted just before) only restarts the wait.
func (tb *tab) waitJS(what, js string) {
	tb.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(tb.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().Before(deadline) && tb.ctx.Err() == nil {
			continue
		}
		c2, cancel2 := context.WithTimeout(tb.ctx, 2*time.Second)
		body, _ := chromedp.Run(c2, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 1500) : ""`))
		cancel2()
		tb.t.Fatalf("%s: waiting for %s: %v\npage %s:\n%s", tb.user, what, err, tb.location(), body)
	}
}

// post submits a form made in the page, as a script (or a crafted page)
// could, with the page's own CSRF token, and waits for the answer.
func (tb *tab) post(action string, fields map[string]string) {
	tb.t.Helper()
	data, _ := json.Marshal(fields)
	js := fmt.Sprintf(`(() => {
		const f = document.createElement("form"); f.method = "post"; f.action = %q;
		const fields = Object.assign({csrf: document.querySelector("input[name=csrf]").value}, %s);
		for (const k in fields) { const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = fields[k]; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); return true })()`, action, data)
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](js)(ctx, t)
		return err
	})); err != nil {
		tb.t.Fatalf("%s: post %s: %v", tb.user, action, err)
	}
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// set types a value into a form field as a person would: the field's
// input and change events fire.
func (tb *tab) set(name, value string) {
	tb.t.Helper()
	eval[bool](tb, fmt.Sprintf(`(() => { const el = document.getElementsByName(%q)[0]; el.value = %q;
		el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true})); return true })()`, name, value))
}

func (tb *tab) check(sel string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.CSS(sel)))
}

// signIn signs in with the user's token through the form.
func (tb *tab) signIn(token string) {
	tb.t.Helper()
	tb.open("/")
	tb.waitJS("the sign-in form", `location.pathname === "/signin" && !!document.querySelector("#token")`)
	tb.do(chromedp.SendKeys(chromedp.ID("token"), token))
	tb.submitBy("#signin")
	tb.waitJS("signed in as "+tb.user, fmt.Sprintf(`(document.querySelector("#whoami") || {}).innerText === %q`, tb.user))
}

// screenshot saves the page when PARTITA_SCREENSHOTS is set.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	if os.Getenv("PARTITA_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// download clicks a link and returns the file the browser saved.
func (tb *tab) download(sel string) []byte {
	tb.t.Helper()
	dir := tb.t.TempDir()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	if err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
				Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: ptr(true),
				BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID})
			return err
		}),
		chromedp.Click(chromedp.CSS(sel)),
	); err != nil {
		tb.t.Fatalf("download %s: %v", sel, err)
	}
	for ev, err := range progress {
		if err != nil {
			tb.t.Fatalf("download %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			data, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				tb.t.Fatal(err)
			}
			return data
		case browser.DownloadProgressStateCanceled:
			tb.t.Fatalf("download %s cancelled", sel)
		}
	}
	tb.t.Fatalf("download %s: no completed download", sel)
	return nil
}

func ptr[T any](v T) *T { return &v }

// TestPortalInTheBrowser walks the portal as its users would: a lead
// signs in, submits a training job through the form (seeing a field
// error and the preview first), finds it in the queue at its position,
// sees the open queue and overview pages update themselves, lowers its
// priority from the team page; a member of the same team is
// refused the same change, by the API; a lead of another team cannot see
// it; the chargeback CSV the lead downloads is the API's, byte for byte.
func TestPortalInTheBrowser(t *testing.T) {
	bctx := browserCtx(t)
	e := newEnv(t)
	start := e.world.Clock().Now
	before := e.seed()

	lead := e.tab(bctx, "lead-s")
	lead.signIn(e.tokens["lead-s"])

	// The preview shows the slice Partita would pick for a memory profile
	// (16 GiB + 5% headroom: 2g.20gb on an H100) and whole GPUs for a
	// count.
	lead.open("/submit")
	lead.waitJS("the submit form", `!!document.querySelector("#submit-form")`)
	lead.check(`input[name=gpu_mode][value=memory]`)
	lead.set("gpu_memory", "16Gi")
	lead.set("gpu_compute", "0.2")
	lead.waitJS("the preview of 16Gi", `!!document.querySelector('#preview [data-mig="2g.20gb"]')`)
	lead.screenshot("submit")
	lead.check(`input[name=kind][value=training]`)
	lead.check(`input[name=gpu_mode][value=count]`)
	lead.set("gpu_count", "4")
	lead.set("tasks", "2")
	lead.set("gang", "2")
	lead.waitJS("the preview of 2 × 4 GPUs", `/2 tasks, started together/.test(document.querySelector("#preview").innerText) && /4 whole GPUs/.test(document.querySelector("#preview").innerText)`)
	lead.set("name", "e2e-train")
	lead.set("image", "registry.example/trainer:1.4")
	lead.set("command", "torchrun train.py")
	lead.set("checkpoint_every", "30m")

	// A bad duration comes back beside its field, the rest as typed.
	lead.set("duration", "forever")
	lead.submitBy("#submit")
	lead.waitJS("the duration error", `/duration: "forever"/.test((document.querySelector('.ferr[data-for="duration"]') || {innerText: ""}).innerText)`)
	if got := eval[string](lead, `document.querySelector("[name=gpu_count]").value`); got != "4" {
		t.Errorf("gpu_count after the error: %q; want the value typed, 4", got)
	}
	lead.set("duration", "6h")
	lead.submitBy("#submit")
	lead.waitJS("the new job's page", `!!document.querySelector("#job-id") && /Submitted job/.test(document.querySelector("#flash").innerText)`)
	id := lead.text("#job-id")
	var job api.Job
	e.apiJSON("lead-s", "GET", api.Prefix+"/jobs/"+id, nil, &job)
	if job.Name != "e2e-train" || job.Gang != 2 || len(job.Tasks) != 2 || job.GPUs != 8 || job.CheckpointEvery != "30m0s" || job.Image != "registry.example/trainer:1.4" {
		t.Fatalf("the form's job: %+v", job)
	}

	// The queue shows it behind the job that waited before it.
	lead.open("/queue")
	row := fmt.Sprintf("#q-%s", id)
	lead.waitJS("the job in the queue", fmt.Sprintf(`!!document.querySelector(%q)`, row+" td.pos"))
	var q api.Queue
	e.apiJSON("lead-s", "GET", api.Prefix+"/queue", nil, &q)
	want := -1
	for _, tq := range q.Teams {
		for _, qe := range tq.Jobs {
			if qe.Job == id {
				want = qe.Position
			}
		}
	}
	if got := lead.text(row + " td.pos"); got != fmt.Sprint(want) || want != 2 {
		t.Errorf("queue position on the page %s, in the API %d; want 2 (behind %s)", got, want, before.ID)
	}
	if why := lead.text(row + " td.why"); why == "" {
		t.Errorf("the queue does not say why %s waits", id)
	}

	// The open queue page updates itself: a job submitted through the
	// API appears on it without a navigation (a marker set on the
	// document survives), and so does its end on the open overview.
	eval[bool](lead, `window.__samePage = true`)
	live := e.submit("lead-s", api.SubmitRequest{Project: "default", Name: "live-update", Class: "batch", GPU: api.GPURequest{Count: 8}, Duration: "1h"})
	lead.waitJS("the API's job on the open queue page", fmt.Sprintf(`!!document.querySelector("#q-%s td.pos") && window.__samePage === true`, live.ID))
	lead.open("/")
	lead.waitJS("the overview", `!!document.querySelector("#queued-jobs")`)
	queued := eval[string](lead, `window.__samePage = true; document.querySelector("#queued-jobs").innerText`)
	e.apiJSON("lead-s", "POST", api.Prefix+"/jobs/"+live.ID+"/cancel", nil, nil)
	lead.waitJS("one job fewer queued on the open overview", fmt.Sprintf(`document.querySelector("#queued-jobs").innerText === String(%s - 1) && window.__samePage === true`, queued))

	// The lead lowers its priority from the team page.
	lead.open("/team")
	sel := "#class-" + id
	lead.waitJS("the priority control", fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	lead.do(chromedp.SetValue(chromedp.CSS(sel), "best-effort"))
	lead.submitBy(fmt.Sprintf("#job-%s form.priority button", id))
	lead.waitJS("the change confirmed", `/is now best-effort/.test((document.querySelector("#flash") || {innerText: ""}).innerText)`)
	e.apiJSON("lead-s", "GET", api.Prefix+"/jobs/"+id, nil, &job)
	if job.Class != "best-effort" {
		t.Fatalf("class after the lead's change: %s; want best-effort", job.Class)
	}

	// A member of the team sees the job but no priority control; posting
	// the change anyway is refused by the API, and the page says so.
	member := e.tab(bctx, "member-s")
	member.signIn(e.tokens["member-s"])
	member.open("/jobs/" + id)
	member.waitJS("the job page", `!!document.querySelector("#timeline")`)
	if eval[bool](member, `!!document.querySelector("#priority-form")`) {
		t.Error("a member is offered the priority form")
	}
	member.post("/jobs/"+id+"/priority", map[string]string{"class": "production"})
	member.waitJS("the refusal", `/Refused: role member may not PATCH/.test((document.querySelector("#flash") || {innerText: ""}).innerText)`)
	e.apiJSON("lead-s", "GET", api.Prefix+"/jobs/"+id, nil, &job)
	if job.Class != "best-effort" {
		t.Fatalf("class after the member's attempt: %s; want best-effort still", job.Class)
	}
	if ev := job.Events[len(job.Events)-1]; ev.State != "priority" || !strings.Contains(ev.Reason, "by lead-s") {
		t.Errorf("last event %+v; want the lead's priority change", ev)
	}

	// Another team's lead: the job is not found, and not in its queue.
	other := e.tab(bctx, "lead-r")
	other.signIn(e.tokens["lead-r"])
	other.open("/jobs/" + id)
	other.waitJS("not found", `/not found/.test((document.querySelector("#error-message") || {innerText: ""}).innerText)`)
	other.open("/queue")
	other.waitJS("research's queue", `!!document.querySelector("#queues")`)
	if eval[bool](other, fmt.Sprintf(`document.body.innerText.includes(%q)`, id)) {
		t.Errorf("lead-r's queue page shows search's job %s", id)
	}

	// Chargeback over a closed period: the table's total is the API's and
	// the CSV the browser downloads is the API's, byte for byte.
	to := e.world.Clock().Now.Add(-time.Second).UTC().Truncate(time.Second)
	from := start.Add(-time.Hour).UTC().Truncate(time.Second)
	period := fmt.Sprintf("from=%s&to=%s&group_by=team,project", from.Format(time.RFC3339), to.Format(time.RFC3339))
	lead.open("/chargeback?" + period)
	lead.waitJS("the report", `!!document.querySelector("#total-gpu-hours")`)
	var rep api.Report
	e.apiJSON("lead-s", "GET", api.Prefix+"/reports/chargeback?"+period, nil, &rep)
	if got := lead.text("#total-gpu-hours"); got != rep.Total.GPUHours || rep.Total.MicroGPUHours == 0 {
		t.Errorf("total GPU-hours on the page %q, in the API %q (want equal, above 0)", got, rep.Total.GPUHours)
	}
	csv := lead.download("#csv")
	status, apiCSV := e.api("lead-s", "GET", api.Prefix+"/reports/chargeback?"+period+"&format=csv", nil)
	if status != 200 || string(csv) != string(apiCSV) {
		t.Errorf("downloaded CSV:\n%s\nthe API's (%d):\n%s", csv, status, apiCSV)
	}
	if !strings.Contains(string(csv), "search,default,") || strings.Contains(string(csv), "research") {
		t.Errorf("lead-s's CSV should have search's rows only:\n%s", csv)
	}

	if os.Getenv("PARTITA_SCREENSHOTS") != "" {
		screenshots(e, bctx, lead, id)
	}
}

// screenshots saves the main pages: the cluster, queues and chargeback
// as the admin sees them (every team), the team and job pages as the
// lead does.
func screenshots(e *env, bctx context.Context, lead *tab, id string) {
	lead.open("/team")
	lead.waitJS("the team page", `!!document.querySelector("#held")`)
	lead.screenshot("team")
	lead.open("/jobs/" + id)
	lead.waitJS("the job page", `!!document.querySelector("#timeline")`)
	lead.screenshot("job")
	admin := e.tab(bctx, "admin")
	admin.signIn(e.tokens["admin"])
	admin.open("/")
	admin.waitJS("the overview", `!!document.querySelector("#overview svg.gpus")`)
	admin.screenshot("overview")
	admin.open("/queue")
	admin.waitJS("the queues", `!!document.querySelector("#queues table.queue")`)
	admin.screenshot("queue")
	admin.open("/chargeback?group_by=team,project")
	admin.waitJS("the report", `!!document.querySelector("#report")`)
	admin.screenshot("chargeback")
	signin := e.tab(bctx, "nobody")
	signin.open("/signin")
	signin.waitJS("the sign-in form", `!!document.querySelector("#token")`)
	signin.screenshot("signin")
}
