// Package cronhook lets this module's simulator (internal/cronsim) shape
// and watch the cron runtime's batching client: the bound on a batch's
// commands, and each time its bound on completions queued behind claims
// and looks lets a batch of completions go first. Both are keyed by the
// client a job's DB was made over, so that seeds simulated side by side
// each see their own. Nothing outside this module can reach it; the
// runtime reads the hooks, and nothing sets them but the simulator's
// tests, before any runtime starts.
package cronhook

// BatchSize returns, if set, the most commands a batch of the batching
// client over c holds: 0 leaves the runtime's default.
var BatchSize func(c any) int

// CompletionsFirst is called, if set, each time the batching client over
// c sends a batch of completions while batches of claims or looks wait,
// since as many batches as its bound allows have passed it.
var CompletionsFirst func(c any)
