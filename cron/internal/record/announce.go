package record

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// Announce publishes payload on the run-now channel: a job's lease name
// (PROTOCOL.md, R16) or a follow notice (E14). The channel counts as the
// command's key, so that a client that shards by key (a Ring, which
// otherwise sends PUBLISH to any shard) sends it to the channel's shard,
// where the replicas subscribed.
func Announce(ctx context.Context, c redisscript.Client, payload string) error {
	pub := redis.NewIntCmd(ctx, "publish", RunNowChannel, payload)
	pub.SetFirstKeyPos(1)
	return redisscript.Process(ctx, c, pub)
}
