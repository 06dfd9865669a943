package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CommandStat is what INFO commandstats says of one command: how many times
// the server ran it, and the microseconds it spent in it. A script's time
// includes the commands it called, which are counted under their own names
// too. Rejected counts the calls refused before they ran (a user's missing
// permission, a wrong number of arguments), and Failed those that ran and
// answered an error.
type CommandStat struct {
	Calls    int64
	Usec     int64
	Rejected int64
	Failed   int64
}

// CommandStats returns the server's INFO commandstats by lower-case command
// name ("set", "evalsha", "client|setinfo" for a subcommand), so that a test or benchmark can tell what its
// operations cost the server from the difference of two readings.
func CommandStats(ctx context.Context, c *redis.Client) (map[string]CommandStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: INFO commandstats: %w", err)
	}
	stats := make(map[string]CommandStat)
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		var s CommandStat
		for field := range strings.SplitSeq(fields, ",") {
			key, value, _ := strings.Cut(field, "=")
			switch key {
			case "calls":
				s.Calls, err = strconv.ParseInt(value, 10, 64)
			case "usec":
				s.Usec, err = strconv.ParseInt(value, 10, 64)
			case "rejected_calls":
				s.Rejected, err = strconv.ParseInt(value, 10, 64)
			case "failed_calls":
				s.Failed, err = strconv.ParseInt(value, 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("redistest: INFO commandstats: %q: %w", line, err)
			}
		}
		stats[name] = s
	}
	return stats, nil
}
