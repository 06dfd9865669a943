package wakuwaku

import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/robfig/cron/v3"
	_ "golang.org/x/sync/errgroup"
)
