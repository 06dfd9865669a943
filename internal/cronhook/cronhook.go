// Package cronhook lets this module's simulator (proof/internal/cronsim) shape
// and watch the cron runtime's batching client: the bound on a batch's
// commands, each time its bound on completions queued behind claims and
// looks lets a batch of completions go first, and its queues. Both are keyed by the
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

// Queued is called, if set, each time the batching client over c puts a
// new batch in one of its queues: the completions' if completions, else
// the claims' and looks'. Dequeued is called, if set, each time it takes
// a batch from one to send it. A batch sent at once, without waiting, is
// in neither call. Both are called under the client's lock, in the order
// the client does them.
var Queued, Dequeued func(c any, completions bool)
