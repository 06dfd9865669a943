package statuspage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/statuspage"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// errSweep is the failing job's error.
var errSweep = errors.New("sweep: 3 invoices still locked")

// startJobs starts a runtime, replica "replica-1", with two leased jobs
// over srv: "report", which succeeds, and "sweep", which fails. It returns
// an Admin over srv once both startup runs are in the records.
func startJobs(t *testing.T, srv *redistest.Server) cron.Admin {
	t.Helper()
	db := lock.NewDB(srv.Client(t))
	leased := cron.WithLease(cron.LeaseConfig{DB: db})
	jobs := []cron.Job{
		cron.Func("report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil }, leased),
		cron.Func("sweep", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return errSweep }, leased),
	}
	rt, err := cron.Start(jobs, cron.WithReplica("replica-1"))
	if err != nil {
		t.Fatalf("cron.Start = %v", err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	admin := cron.NewAdmin(db)
	for _, job := range []string{"report", "sweep"} {
		waitFor(t, admin, job, "its startup run recorded", func(st cron.JobStatus) bool { return st.Last != nil })
	}
	return admin
}

// waitFor waits until the record of job satisfies ok: the runtime writes
// it after the run returns, on its own goroutine.
func waitFor(t *testing.T, admin cron.Admin, job, what string, ok func(cron.JobStatus) bool) cron.JobStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := admin.Status(t.Context(), job)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within 10s: Status = %+v, %v", job, what, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do serves one request and returns the response and its body.
func do(t *testing.T, h http.Handler, r *http.Request) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// rowOf returns the table row of job in page, or "".
func rowOf(page, job string) string {
	m := regexp.MustCompile(`(?s)<tr data-job="` + regexp.QuoteMeta(job) + `">.*?</tr>`).FindString(page)
	return m
}

// TestPageListsJobs reads the page of a service whose two leased jobs
// ran: each job has its row, with its replica and outcome, the failure's
// error, and no buttons, since actions are off.
func TestPageListsJobs(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	res, page := do(t, statuspage.New(admin), httptest.NewRequest("GET", "/", nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %s, want 200; body:\n%s", res.Status, page)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy = %q, want frame-ancestors 'none'", csp)
	}
	for _, tc := range []struct {
		job  string
		want []string
	}{
		{"report", []string{`<span class="pill ok">ok</span>`, `on <span class="replica">replica-1</span>`, "seen "}},
		{"sweep", []string{`<span class="pill bad">error</span>`, errSweep.Error(), `on <span class="replica">replica-1</span>`}},
	} {
		t.Run(tc.job, func(t *testing.T) {
			row := rowOf(page, tc.job)
			if row == "" {
				t.Fatalf("no row for %q in the page:\n%s", tc.job, page)
			}
			for _, want := range tc.want {
				if !strings.Contains(row, want) {
					t.Errorf("row of %q lacks %q:\n%s", tc.job, want, row)
				}
			}
		})
	}
	for _, unwanted := range []string{"<form", "<button", "<script"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the page without actions has %q:\n%s", unwanted, page)
		}
	}
	// The live replicas, from the registry: the one runtime.
	if want := `<h2>Live replicas <span class="sub">1</span></h2>`; !strings.Contains(page, want) {
		t.Errorf("the page lacks %s:\n%s", want, page)
	}
	if want := `<tr data-replica="replica-1"><td class="replica">replica-1</td>`; !strings.Contains(page, want) {
		t.Errorf("the page lacks the live replica, %s", want)
	}
	if want := `<meta http-equiv="refresh" content="5; url=?">`; !strings.Contains(page, want) {
		t.Errorf("the page lacks %s", want)
	}
}

// TestJSON reads the JSON endpoint: every job, one job, and an unknown job.
func TestJSON(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin)

	t.Run("all", func(t *testing.T) {
		res, body := do(t, h, httptest.NewRequest("GET", "/?format=json", nil))
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET ?format=json = %s, %s; want 200, application/json", res.Status, res.Header.Get("Content-Type"))
		}
		var jobs []cron.JobStatus
		if err := json.Unmarshal([]byte(body), &jobs); err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
		want, err := admin.Jobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != len(want) || len(jobs) != 2 {
			t.Fatalf("GET ?format=json has %d jobs, want %d (2)", len(jobs), len(want))
		}
		for i, j := range jobs {
			if j.Job != want[i].Job || j.Last == nil || j.Last.Outcome != want[i].Last.Outcome || j.Last.Replica != "replica-1" {
				t.Errorf("job %d = %+v, want %+v", i, j, want[i])
			}
		}
	})
	t.Run("one", func(t *testing.T) {
		res, body := do(t, h, httptest.NewRequest("GET", "/?format=json&job=sweep", nil))
		var st cron.JobStatus
		if err := json.Unmarshal([]byte(body), &st); res.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET ?format=json&job=sweep = %s, %v; body %s", res.Status, err, body)
		}
		if st.Job != "sweep" || st.LastFailure == nil || st.LastFailure.Error != errSweep.Error() {
			t.Errorf("sweep's status = %+v, want its last failure %q", st, errSweep)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		res, body := do(t, h, httptest.NewRequest("GET", "/?format=json&job=nightly", nil))
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); res.StatusCode != http.StatusNotFound || err != nil || e.Error == "" {
			t.Errorf("GET ?format=json&job=nightly = %s, %s; want 404 and {\"error\": …}", res.Status, body)
		}
	})
	t.Run("bad format", func(t *testing.T) {
		if res, _ := do(t, h, httptest.NewRequest("GET", "/?format=xml", nil)); res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET ?format=xml = %s, want 400", res.Status)
		}
	})
}

// visitor is a browser that loaded the page of h: its token cookie and the
// token in the page's forms.
type visitor struct {
	cookies []*http.Cookie
	token   string
}

func visit(t *testing.T, h http.Handler) visitor {
	t.Helper()
	res, page := do(t, h, httptest.NewRequest("GET", "/", nil))
	m := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(page)
	if res.StatusCode != http.StatusOK || m == nil || len(res.Cookies()) == 0 {
		t.Fatalf("GET / = %s with cookies %v; want 200, a token cookie and forms with a token; page:\n%s", res.Status, res.Cookies(), page)
	}
	return visitor{cookies: res.Cookies(), token: m[1]}
}

// post makes the POST of a form of the page.
func (v visitor) post(target string, form url.Values) *http.Request {
	r := httptest.NewRequest("POST", target, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range v.cookies {
		r.AddCookie(c)
	}
	return r
}

// get makes a GET of the page by the visitor's browser, with its cookie.
func (v visitor) get(target string) *http.Request {
	r := httptest.NewRequest("GET", target, nil)
	for _, c := range v.cookies {
		r.AddCookie(c)
	}
	return r
}

func (v visitor) form(action, job string) url.Values {
	return url.Values{"action": {action}, "job": {job}, "token": {v.token}}
}

// TestActionsOff posts a well-made form to a page without actions: it is
// refused, and the job is not paused.
func TestActionsOff(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin)
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			r := httptest.NewRequest(method, "/", strings.NewReader("action=pause&job=report"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, _ := do(t, h, r)
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s / = %s, Allow %q; want 405, Allow GET, HEAD", method, res.Status, res.Header.Get("Allow"))
			}
		})
	}
	if st, err := admin.Status(t.Context(), "report"); err != nil || st.Paused {
		t.Errorf("Status(report) = paused %v, %v; want not paused", st.Paused, err)
	}
}

// TestCrossSiteRefused posts forms that a page of another site could have
// made: each is refused with 403, and the job is not paused.
func TestCrossSiteRefused(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin, statuspage.WithActions())
	v := visit(t, h)
	for _, tc := range []struct {
		name   string
		mangle func(r *http.Request, form url.Values) *http.Request
	}{
		{"no token", func(_ *http.Request, form url.Values) *http.Request {
			form.Del("token")
			return v.post("/", form)
		}},
		{"another token", func(_ *http.Request, form url.Values) *http.Request {
			form.Set("token", "AAAAAAAAAAAAAAAAAAAAAAAAAA")
			return v.post("/", form)
		}},
		{"no cookie", func(_ *http.Request, form url.Values) *http.Request {
			return visitor{token: v.token}.post("/", form)
		}},
		{"cross-site fetch", func(r *http.Request, _ url.Values) *http.Request {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}},
		{"same-site fetch", func(r *http.Request, _ url.Values) *http.Request {
			r.Header.Set("Sec-Fetch-Site", "same-site")
			return r
		}},
		{"cross origin", func(r *http.Request, _ url.Values) *http.Request {
			r.Header.Set("Origin", "https://evil.example")
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := v.form("pause", "report")
			r := tc.mangle(v.post("/", form), form)
			if res, body := do(t, h, r); res.StatusCode != http.StatusForbidden {
				t.Errorf("POST pause = %s, want 403; body:\n%s", res.Status, body)
			}
			if st, err := admin.Status(t.Context(), "report"); err != nil || st.Paused {
				t.Errorf("Status(report) = paused %v, %v; want not paused", st.Paused, err)
			}
		})
	}
}

// TestActions pauses, resumes and runs a job with the page's forms, as a
// browser of the page's own origin posts them.
func TestActions(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin, statuspage.WithActions())
	v := visit(t, h)
	post := func(t *testing.T, action string) string {
		t.Helper()
		r := v.post("/", v.form(action, "report"))
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", "http://example.com") // httptest's Host
		res, body := do(t, h, r)
		if want := "?done=" + action + "&on=report&sig="; res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), want) {
			t.Fatalf("POST %s = %s, Location %q; want 303, %q and a signature; body:\n%s", action, res.Status, res.Header.Get("Location"), want, body)
		}
		return res.Header.Get("Location")
	}

	t.Run("pause", func(t *testing.T) {
		back := post(t, "pause")
		if st, err := admin.Status(t.Context(), "report"); err != nil || !st.Paused {
			t.Fatalf("Status(report) = paused %v, %v; want paused", st.Paused, err)
		}
		_, page := do(t, h, v.get("/"+back))
		row := rowOf(page, "report")
		for _, want := range []string{`<span class="pill warn">paused</span>`, `value="resume">Resume</button>`} {
			if !strings.Contains(row, want) {
				t.Errorf("row of report after pause lacks %q:\n%s", want, row)
			}
		}
		if want := "Paused report on every replica."; !strings.Contains(page, want) {
			t.Errorf("the page after pause lacks %q", want)
		}
		if want := `content="5; url=?"`; !strings.Contains(page, want) {
			t.Errorf("the page after pause lacks %s: its reload would repeat the notice", want)
		}
	})
	t.Run("from the job's own page", func(t *testing.T) {
		r := v.post("/?job=report&done=run&on=report", v.form("resume", "report"))
		res, body := do(t, h, r)
		if want := "?done=resume&job=report&on=report&sig="; res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), want) {
			t.Fatalf("POST resume from ?job=report = %s, Location %q; want 303, %q; body:\n%s", res.Status, res.Header.Get("Location"), want, body)
		}
		post(t, "pause")
	})
	t.Run("resume", func(t *testing.T) {
		post(t, "resume")
		if st, err := admin.Status(t.Context(), "report"); err != nil || st.Paused {
			t.Fatalf("Status(report) = paused %v, %v; want not paused", st.Paused, err)
		}
	})
	t.Run("run", func(t *testing.T) {
		before, err := admin.Status(t.Context(), "report")
		if err != nil {
			t.Fatal(err)
		}
		post(t, "run")
		st := waitFor(t, admin, "report", "run on request", func(st cron.JobStatus) bool {
			return st.Last != nil && st.Last.Started.After(before.Last.Started)
		})
		if st.Last.Trigger != cron.TriggerRequest {
			t.Errorf("the run after run-now has trigger %v, want %v", st.Last.Trigger, cron.TriggerRequest)
		}
	})
}

// TestNoticeOnlyFromTheServer opens links that the page's own redirect
// did not make, with the visitor's cookie: none shows a notice, though the
// page shows. Only the redirect of the visitor's own POST does.
func TestNoticeOnlyFromTheServer(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin, statuspage.WithActions())
	v := visit(t, h)
	other := visit(t, h) // another browser, with a token of its own
	res, _ := do(t, h, v.post("/", v.form("pause", "report")))
	back, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || back.Query().Get("sig") == "" {
		t.Fatalf("POST pause = %s, Location %q; want 303 and a signed notice", res.Status, res.Header.Get("Location"))
	}
	sig := back.Query().Get("sig")
	notice := regexp.MustCompile(`class="notice done"[^>]*>([^<]*)<`)
	for _, tc := range []struct {
		name string
		req  *http.Request
		want string // the notice; "" for none
	}{
		{"the redirect", v.get("/" + back.String()), "Paused report on every replica."},
		{"a crafted link", v.get("/?done=pause&on=anything"), ""},
		{"a crafted link to a real job", v.get("/?done=pause&on=report"), ""},
		{"another job with the signature", v.get("/?done=pause&on=sweep&sig=" + sig), ""},
		{"another action with the signature", v.get("/?done=resume&on=report&sig=" + sig), ""},
		{"a made-up signature", v.get("/?done=pause&on=anything&sig=AAAAAAAAAAAAAAAAAAAAAA"), ""},
		{"the redirect in another browser", other.get("/" + back.String()), ""},
		{"the redirect without the cookie", httptest.NewRequest("GET", "/"+back.String(), nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, page := do(t, h, tc.req)
			if res.StatusCode != http.StatusOK || rowOf(page, "report") == "" {
				t.Fatalf("GET %s = %s, want 200 and the page; body:\n%s", tc.req.URL, res.Status, page)
			}
			got := ""
			if m := notice.FindStringSubmatch(page); m != nil {
				got = m[1]
			}
			if got != tc.want {
				t.Errorf("GET %s shows the notice %q, want %q", tc.req.URL, got, tc.want)
			}
		})
	}
	// A page without actions never shows one: it did nothing.
	if _, page := do(t, statuspage.New(admin), v.get("/"+back.String())); notice.MatchString(page) {
		t.Errorf("a page without actions shows a notice:\n%s", page)
	}
}

// TestBadForms posts forms the page doesn't make, and one for a job
// without a record.
func TestBadForms(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	h := statuspage.New(admin, statuspage.WithActions())
	v := visit(t, h)
	for _, tc := range []struct {
		name, action, job string
		want              int
	}{
		{"unknown job", "pause", "nightly", http.StatusNotFound},
		{"unknown action", "delete", "report", http.StatusBadRequest},
		{"no job", "pause", "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, h, v.post("/", v.form(tc.action, tc.job)))
			if res.StatusCode != tc.want {
				t.Errorf("POST %s %q = %s, want %d; body:\n%s", tc.action, tc.job, res.Status, tc.want, body)
			}
		})
	}
	t.Run("unknown job page", func(t *testing.T) {
		res, body := do(t, h, httptest.NewRequest("GET", "/?job=nightly", nil))
		if res.StatusCode != http.StatusNotFound || !strings.Contains(body, "no record of the job") {
			t.Errorf("GET ?job=nightly = %s, want 404 and the error; body:\n%s", res.Status, body)
		}
	})
}

// TestRedisDown reads the page of a Redis that stopped: a clear error
// with 503, as HTML and as JSON.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	admin := startJobs(t, srv)
	h := statuspage.New(admin, statuspage.WithActions())
	v := visit(t, h)
	srv.Kill(t)
	for _, tc := range []struct {
		name string
		req  *http.Request
		want string
	}{
		{"page", httptest.NewRequest("GET", "/", nil), "cron: listing the job records"},
		{"page says it recovers", httptest.NewRequest("GET", "/", nil), "shows the jobs again once Redis answers"},
		{"json", httptest.NewRequest("GET", "/?format=json", nil), `"error": "cron: listing the job records`},
		{"one", httptest.NewRequest("GET", "/?job=report", nil), "cron: reading the record of"},
		{"pause", v.post("/", v.form("pause", "report")), `cron: pause &#34;report&#34;`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits out go-redis's retries
			res, body := do(t, h, tc.req)
			if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %s; want 503 and %q; body:\n%s", tc.req.Method, tc.req.URL, res.Status, tc.want, body)
			}
		})
	}
}

// TestMounted mounts the page under a prefix of a mux, on a real server,
// and pauses a job through it with a client that follows the redirect:
// the page's relative references bring it back under the prefix.
func TestMounted(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	mux := http.NewServeMux()
	mux.Handle("/admin/cron/", http.StripPrefix("/admin/cron", statuspage.New(admin, statuspage.WithActions())))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	get := func(t *testing.T, path string) string {
		t.Helper()
		res, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %s, want 200; body:\n%s", path, res.Status, body)
		}
		return string(body)
	}
	page := get(t, "/admin/cron/")
	token := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(page)
	if token == nil || rowOf(page, "report") == "" {
		t.Fatalf("GET /admin/cron/: no row of report with a form:\n%s", page)
	}
	res, err := client.PostForm(srv.URL+"/admin/cron/", url.Values{"action": {"pause"}, "job": {"report"}, "token": {token[1]}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := "/admin/cron/?done=pause&on=report&sig="; res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Request.URL.RequestURI(), want) {
		t.Fatalf("POST /admin/cron/ ended at %s with %s, want %s with 200; body:\n%s", res.Request.URL.RequestURI(), res.Status, want, body)
	}
	if !strings.Contains(rowOf(string(body), "report"), `value="resume"`) {
		t.Errorf("the page after the redirect doesn't show report paused:\n%s", body)
	}
	if want := "Paused report on every replica."; !strings.Contains(string(body), want) {
		t.Errorf("the page after the redirect lacks %q:\n%s", want, body)
	}
	if st, err := admin.Status(t.Context(), "report"); err != nil || !st.Paused {
		t.Errorf("Status(report) = paused %v, %v; want paused", st.Paused, err)
	}
	if js := get(t, "/admin/cron/?format=json&job=report"); !strings.Contains(js, `"paused": true`) {
		t.Errorf("GET /admin/cron/?format=json&job=report = %s, want paused", js)
	}
}

// TestRefresh checks the page's reload for each WithRefresh.
func TestRefresh(t *testing.T) {
	admin := startJobs(t, redistest.Start(t))
	for _, tc := range []struct {
		refresh time.Duration
		query   string
		want    string // the meta tag; "" for none
	}{
		{0, "", ""},
		{time.Second, "", `content="1; url=?"`},
		{1500 * time.Millisecond, "?job=report&done=pause&on=report", `content="2; url=?job=report"`},
	} {
		t.Run(fmt.Sprint(tc.refresh), func(t *testing.T) {
			_, page := do(t, statuspage.New(admin, statuspage.WithRefresh(tc.refresh)), httptest.NewRequest("GET", "/"+tc.query, nil))
			got := regexp.MustCompile(`<meta http-equiv="refresh" (content="[^"]*")>`).FindStringSubmatch(page)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("WithRefresh(%v): the page reloads, %s; want no reload", tc.refresh, got[1])
			case tc.want != "" && (got == nil || got[1] != tc.want):
				t.Errorf("WithRefresh(%v): meta refresh %v, want %s", tc.refresh, got, tc.want)
			}
		})
	}
}

// TestNewPanics checks New's refusals of a programmer's error.
func TestNewPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  statuspage.Option
	}{
		{"nil option", nil},
		{"negative refresh", statuspage.WithRefresh(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%s) did not panic", tc.name)
				}
			}()
			statuspage.New(cron.Admin{}, tc.opt)
		})
	}
}

// TestZeroAdmin serves the page of an Admin without a client: an error,
// not a panic.
func TestZeroAdmin(t *testing.T) {
	res, body := do(t, statuspage.New(cron.Admin{}), httptest.NewRequest("GET", "/", nil))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, lock.ErrNoClient.Error()) {
		t.Errorf("GET / = %s, want 503 and %q; body:\n%s", res.Status, lock.ErrNoClient, body)
	}
}
