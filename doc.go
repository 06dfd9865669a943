// Package wakuwaku runs cron jobs on every replica of a service, and lets the
// replicas agree on who goes first through lease locks on Redis (package
// lock): run the hourly report once per hour across the deployment, finalize
// an invoice once, rebuild an index without two rebuilders.
//
// A [ServiceBuilder] holds a service's dependencies by type and registers its
// cron jobs; Start starts them and returns a [Crons] handle whose Shutdown
// stops them gracefully.
package wakuwaku
