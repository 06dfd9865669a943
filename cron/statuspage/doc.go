// Package statuspage is an [http.Handler] that shows the records of a
// service's [cron.Leased] jobs, cluster-wide, as an HTML page an operator
// opens in a browser, and serves the same data as JSON. It reads and steers
// through a [cron.Admin], so it shows what [cron.Admin.Jobs] says: for each
// job its last run (slot, replica, outcome, duration), the run in progress
// and since when, its last failure, its pause, a pending run-now request and
// its next tick; its schedule, its last success, a slot whose attempts
// were used up, and a timeline of its recent slots ([cron.JobStatus.History]),
// an SVG drawn on the server on one time scale: a mark per slot where it
// began, coloured by how the slot went (ok, failed, missed, skipped), and
// its attempts beside it, each a bar from its start as long as it took,
// coloured by its outcome. A Cron job's slots between the history's first
// and last of which the history has no run are marked missed; an entry
// whose outcome is "skipped" is marked skipped, with its reason (still
// running, paused). Below the timeline the page
// says the same in words, so nothing needs a hover.
//
// The page fits a laptop's window as a table and a phone's as a card per
// job, and scrolls sideways at neither.
//
// # Mounting
//
// The handler does not look at the request's path: every link, form and
// redirect it makes is relative to the page's own URL (a query string only),
// so it works wherever it is mounted, with or without [http.StripPrefix]:
//
//	admin := cron.NewAdmin(lock.NewDB(client))
//	mux.Handle("/admin/cron/", requireOperator(statuspage.New(admin, statuspage.WithActions())))
//
// It answers GET and HEAD with the page, and, with ?format=json, with the
// jobs as a JSON array of [cron.JobStatus], as `wakuwaku status -json`
// prints them. ?job=NAME narrows either to one job (a JSON object), and
// answers 404 Not Found if the job has no record. A Redis that can't be
// read gives the page (or a JSON object {"error": "…"}) with the error and
// status 503 Service Unavailable; the page keeps refreshing, so it recovers
// by itself when Redis does.
//
// The page works without JavaScript (it uses none) and reloads itself every
// 5 seconds ([WithRefresh]). Every reload lists the jobs with [cron.Admin.Jobs],
// which scans the keys of every master: mind it on a large Redis.
//
// # Authentication is the mounting service's job
//
// The handler checks nobody's identity: whoever reaches it sees every job,
// and, with [WithActions], can pause, resume and run them. Mount it behind
// the service's own authentication and authorization (a middleware that
// lets only operators in), or on an internal listener only.
//
// # Actions
//
// With [WithActions] each job's row has Pause (or Resume) and Run now
// buttons: HTML forms that POST to the page, and, once done, redirect back to
// it (303 See Other), where a notice says what was done. Without it the page
// has no buttons and a POST is refused with 405 Method Not Allowed.
//
// The notice comes only from what the handler did: the redirect's query
// names the action and the job and carries their signature, an HMAC-SHA256
// keyed with the visitor's token (below), and the page shows a notice only
// for a signature it checks against the visitor's own token. A link made by
// anyone else (?done=pause&on=billing) shows the page without a notice.
// Replicas behind a load balancer check each other's signatures, since the
// key is the visitor's, not the handler's. A pause or run-now is recorded as
// coming from the serving process ([cron.NewAdmin]), not from a person: log
// who asked in the authentication middleware if you need to know.
//
// A POST must pass two checks against cross-site request forgery, else it
// is refused with 403 Forbidden:
//   - it comes from the page's own origin, as [http.CrossOriginProtection]
//     judges by the browser's Sec-Fetch-Site or Origin header;
//   - its form carries the token of the visitor's cookie (a random value the
//     page sets, HttpOnly and SameSite=Strict), so it was made by a page
//     this visitor loaded. The token is the visitor's, not the handler's:
//     replicas behind a load balancer accept each other's forms.
//
// The page also forbids being framed (Content-Security-Policy
// frame-ancestors 'none'), so its buttons can't be clicked through another
// site's page.
package statuspage
