// Package bench holds the side-by-side benchmarks of wakuwaku against the
// libraries its users would pick instead: github.com/bsm/redislock,
// github.com/go-redsync/redsync/v4 and a raw go-redis baseline for locks,
// github.com/go-co-op/gocron/v2 and github.com/robfig/cron/v3 for the cron
// runtime.
//
// It is a module of its own, with a replace directive to the library, so that
// the peers it measures never enter the library's go.mod.
//
// The package itself holds what the benchmarks share: a redis-server process
// per run ([StartServer]) and a dialer that counts round trips
// ([Counter]). The lock benchmarks are BenchmarkLock (go-redis's
// AutoPipeliner included) and BenchmarkBatch in this package's tests; the
// cron runs are ./cmd/cronbench, one child process per scheduler; ./run
// (which calls ./cmd/benchrun) runs them, and the root module's
// BenchmarkRunProtocol, and writes ../BENCHMARKS.md.
package bench
