module github.com/wakuwaku-go/wakuwaku/bench

go 1.26.0

replace github.com/wakuwaku-go/wakuwaku => ../

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/robfig/cron/v3 v3.0.1
	github.com/wakuwaku-go/wakuwaku v0.0.0-00010101000000-000000000000
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
