// Package e2e holds the tests that drive a real browser: headless Chromium,
// through github.com/chromedp/chromedp, against the pages of the library
// (package statuspage) served over real job records on a real redis-server.
//
// It is a module of its own, as bench is, so that the library's go.mod
// doesn't carry chromedp. Run it from this directory:
//
//	go test ./...               # needs chromium and redis-server on PATH
//	go test ./... -artifacts    # keep the screenshots, under ./_artifacts
//	go test ./... -update-docs  # and copy the busy page's, at 1280 and 390 px, to ../docs
//
// The browser is Debian's chromium (scripts/test installs it when it is
// missing), or the one CHROMIUM names. Without one the tests fail: they
// never skip.
package e2e
