package record

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// emptyReplies answers every command with an empty array, as a wrapper
// client that lost a reply's body might.
type emptyReplies struct{}

func (emptyReplies) Process(_ context.Context, cmd redis.Cmder) error {
	if c, ok := cmd.(*redis.Cmd); ok {
		c.SetVal([]any{})
	}
	return nil
}

// TestCompleteEmptyReply: a completion whose reply is an empty array is an
// error, not a panic (it indexed the reply's first element unchecked).
func TestCompleteEmptyReply(t *testing.T) {
	j := &Job{C: emptyReplies{}, Completing: emptyReplies{}, Keys: []string{Key("report"), HistoryKey("report")}, Attempts: 1}
	c, err := j.Complete(context.Background(), CompleteArgs{Token: "t", Outcome: "ok"})
	if err == nil || c.Held {
		t.Fatalf("Complete of an empty reply = %+v, %v; want an error", c, err)
	}
}
