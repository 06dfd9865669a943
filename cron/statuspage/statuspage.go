package statuspage

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// defaultRefresh is how often the page reloads itself unless WithRefresh
// says otherwise.
const defaultRefresh = 5 * time.Second

// Handler serves the status page of the jobs that its [cron.Admin] reads;
// see the package documentation for what it answers. Make one with [New];
// the zero Handler is not usable. A Handler is safe for concurrent use.
type Handler struct {
	admin   cron.Admin
	actions bool
	refresh time.Duration // 0: the page does not reload itself
	origin  *http.CrossOriginProtection
}

// Option configures a [Handler] made by [New].
type Option func(*options)

type options struct {
	actions bool
	refresh time.Duration
}

// WithActions gives each job Pause, Resume and Run now buttons, which call
// [cron.Admin.Pause], [cron.Admin.Resume] and [cron.Admin.RunNow]. Without
// it the page only shows, and refuses a POST.
func WithActions() Option {
	return func(o *options) { o.actions = true }
}

// WithRefresh sets how often the page reloads itself, in whole seconds
// (rounded up); 0 turns the reload off. The default is 5 seconds.
// [New] panics if d is negative.
func WithRefresh(d time.Duration) Option {
	return func(o *options) { o.refresh = d }
}

// New returns a Handler that shows the jobs admin reads. It panics if an
// option is nil or invalid, a programmer's error.
func New(admin cron.Admin, opts ...Option) *Handler {
	o := options{refresh: defaultRefresh}
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("statuspage: New: option %d is nil", i))
		}
		opt(&o)
	}
	if o.refresh < 0 {
		panic(fmt.Sprintf("statuspage: New: WithRefresh(%v): want 0 or more", o.refresh))
	}
	return &Handler{
		admin:   admin,
		actions: o.actions,
		refresh: o.refresh,
		origin:  http.NewCrossOriginProtection(),
	}
}

// The query parameters and form fields of the page.
const (
	paramFormat = "format" // "json", or "" for the page
	paramJob    = "job"    // narrows the page to one job; a form's job
	paramDone   = "done"   // the action just done, after a redirect
	paramOn     = "on"     // the job it was done on
	paramSig    = "sig"    // the notice's signature: see noticeSig
	fieldAction = "action" // a form's action: one of actions' keys
	fieldToken  = "token"  // a form's copy of the visitor's token
)

// tokenCookie holds the visitor's token.
const tokenCookie = "wakuwaku-statuspage-token"

// maxForm bounds a POST's body: a form has three short fields.
const maxForm = 64 << 10

// ServeHTTP answers GET and HEAD with the page or its JSON, and, with
// [WithActions], a POST with an action.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.show(w, r)
	case http.MethodPost:
		if !h.actions {
			w.Header().Set("Allow", "GET, HEAD")
			h.fail(w, r, http.StatusMethodNotAllowed, errors.New("actions are off on this page (statuspage.WithActions)"))
			return
		}
		h.act(w, r)
	default:
		allow := "GET, HEAD"
		if h.actions {
			allow += ", POST"
		}
		w.Header().Set("Allow", allow)
		h.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed", r.Method))
	}
}

// show serves the page, or its JSON.
func (h *Handler) show(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch q.Get(paramFormat) {
	case "", "html", "json":
	default:
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown format %q: want json, or none for the page", q.Get(paramFormat)))
		return
	}
	one := q.Get(paramJob)
	var jobs []cron.JobStatus
	var err error
	if one != "" {
		var st cron.JobStatus
		st, err = h.admin.Status(r.Context(), one)
		jobs = []cron.JobStatus{st}
	} else {
		jobs, err = h.admin.Jobs(r.Context())
	}
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	noCache(w)
	if wantsJSON(r) {
		var v any = jobs
		switch {
		case one != "":
			v = jobs[0]
		case jobs == nil:
			v = []cron.JobStatus{}
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	p := h.newPage(w, r)
	p.Jobs = rows(jobs, p.Now)
	p.One = one
	if one == "" {
		reps, err := h.admin.Replicas(r.Context())
		if err != nil {
			h.fail(w, r, statusOf(err), err)
			return
		}
		p.Replicas = replicaRows(reps, p.Now)
	}
	if action, job := q.Get(paramDone), q.Get(paramOn); job != "" && h.actions && signedNotice(r, action, job, q.Get(paramSig)) {
		p.Done = doneText(action, job)
	}
	h.render(w, http.StatusOK, p)
}

// actions are what a form may ask for, by its action field.
var actions = map[string]func(cron.Admin, context.Context, string) error{
	"pause":  cron.Admin.Pause,
	"resume": cron.Admin.Resume,
	"run":    cron.Admin.RunNow,
}

// act does a form's action, then redirects to the page.
func (h *Handler) act(w http.ResponseWriter, r *http.Request) {
	if err := h.origin.Check(r); err != nil {
		h.fail(w, r, http.StatusForbidden, fmt.Errorf("refused a cross-origin request: %w", err))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("reading the form: %w", err))
		return
	}
	if !validToken(r) {
		h.fail(w, r, http.StatusForbidden, errors.New("the form's token is missing or is not this browser's: reload the page and try again"))
		return
	}
	action, job := r.PostForm.Get(fieldAction), r.PostForm.Get(paramJob)
	do, ok := actions[action]
	switch {
	case !ok:
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown action %q: want pause, resume or run", action))
		return
	case job == "":
		h.fail(w, r, http.StatusBadRequest, errors.New("the form names no job"))
		return
	}
	if err := do(h.admin, r.Context(), job); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	// Back to the page the form was on (its filter kept), saying what was
	// done, with a relative reference: the handler doesn't know where it
	// is mounted. The notice is signed, so that a link made elsewhere
	// can't show one.
	back := url.Values{paramDone: {action}, paramOn: {job}, paramSig: {noticeSig(r.PostForm.Get(fieldToken), action, job)}}
	if one := r.URL.Query().Get(paramJob); one != "" {
		back.Set(paramJob, one)
	}
	w.Header().Set("Location", "?"+back.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

// statusOf is the HTTP status of an Admin error.
func statusOf(err error) int {
	if errors.Is(err, cron.ErrUnknownJob) {
		return http.StatusNotFound
	}
	// Redis down or slow, or the Admin has no client: nothing the
	// request could change.
	return http.StatusServiceUnavailable
}

// fail answers with err: as the page, with the error in place of the
// jobs, or as a JSON object for a JSON request.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	noCache(w)
	if wantsJSON(r) {
		writeJSON(w, code, struct {
			Error string `json:"error"`
		}{err.Error()})
		return
	}
	p := h.newPage(w, r)
	p.Error = err.Error()
	p.Status = fmt.Sprintf("%d %s", code, http.StatusText(code))
	p.Unavailable = code == http.StatusServiceUnavailable
	p.One = r.URL.Query().Get(paramJob)
	h.render(w, code, p)
}

// wantsJSON reports a request for the JSON endpoint.
func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get(paramFormat) == "json"
}

func noCache(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Text as it is, as wakuwaku status -json prints it: nosniff keeps a
	// browser from reading it as HTML.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away, or nothing more can be said
}

// token returns the visitor's token, from its cookie, and sets a new one
// if it has none or one of the wrong shape.
func token(w http.ResponseWriter, r *http.Request) string {
	for _, c := range r.CookiesNamed(tokenCookie) {
		if wellFormed(c.Value) {
			return c.Value
		}
	}
	t := rand.Text() // 26 characters, 130 bits
	http.SetCookie(w, &http.Cookie{
		Name:     tokenCookie,
		Value:    t,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
		// No Path: the cookie's default path covers the page's URL,
		// wherever it is mounted.
	})
	return t
}

// wellFormed reports a token of the shape rand.Text makes: 26 letters of
// the base32 alphabet.
func wellFormed(t string) bool {
	if len(t) != 26 {
		return false
	}
	for _, c := range []byte(t) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// noticeSig signs the notice of an action done on a job, for the visitor
// whose token it is: an HMAC-SHA256 keyed with the token, which only the
// visitor's browser (an HttpOnly cookie, and the forms of the pages it
// loaded) and the replicas that see its requests know. A link made by
// anyone else can't carry a notice that the page would show, and the
// replicas behind a load balancer need no shared secret to check each
// other's. 128 bits of it, base64url.
func noticeSig(token, action, job string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("wakuwaku statuspage notice\x00" + action + "\x00" + job))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// signedNotice reports whether sig is noticeSig's for one of the visitor's
// tokens: the notice comes from a POST this visitor made and the page
// performed.
func signedNotice(r *http.Request, action, job, sig string) bool {
	if sig == "" {
		return false
	}
	for _, c := range r.CookiesNamed(tokenCookie) {
		if wellFormed(c.Value) && hmac.Equal([]byte(noticeSig(c.Value, action, job)), []byte(sig)) {
			return true
		}
	}
	return false
}

// validToken reports a form whose token is one of the visitor's cookies'.
// The visitor may have several, from pages mounted at different paths of
// one host.
func validToken(r *http.Request) bool {
	form := r.PostForm.Get(fieldToken)
	if form == "" {
		return false
	}
	for _, c := range r.CookiesNamed(tokenCookie) {
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) == 1 {
			return true
		}
	}
	return false
}
