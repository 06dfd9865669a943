// Package fault is the harness of the fault suite: the tests in this
// directory put package lock (and, through it, the cron runtime) through the
// failures that break lock libraries in production, and measure what happens.
// RELIABILITY.md at the root of the module publishes what the last long run
// measured.
//
// The harness has five pieces, each usable on its own:
//
//   - [Proxy], a TCP proxy between a client and Redis that adds latency,
//     blackholes traffic (a partition: bytes wait, connections stay open) and
//     cuts connections;
//   - [Main], [Spawn] and [Child]: contenders as child processes, the test
//     binary re-executed in a role, which a test pauses (SIGSTOP), resumes
//     and kills (SIGKILL);
//   - [Coordinator] and [Link]: the parent's end and a child's end of one
//     loopback connection, over which children reach the protected resource,
//     send their history and notes, and wait for the parent's gates;
//   - [Resource], the protected resource: a version column per name that
//     refuses a write whose version moved, and counts the writes that came
//     from a holder that had been overtaken (stale writes);
//   - [Recorder] and [History]: every lock operation with its call and return
//     time on one clock shared by all processes, checked for overlapping
//     holders ([History.Overlaps]) and for linearizability against a model of
//     the lock ([History.Linearizable]), by a search bounded in memory and
//     time that gives up, saying so, rather than exceed them; its verdicts
//     are checked against porcupine's on short histories.
//
// Nothing here is safe to use outside tests: the functions take a
// testing.TB and report failures through it.
package fault
