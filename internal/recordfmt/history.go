package recordfmt

import "encoding/json"

// Entry is one run of a job's history as the completion script and C1
// write it (cron/PROTOCOL.md, the record): times in ms of the server's
// clock, but due, the replica's.
type Entry struct {
	Slot    string `json:"slot"`
	By      string `json:"by"`
	Why     string `json:"why"`
	Try     string `json:"try"`
	Due     string `json:"due"`
	Start   string `json:"start"`
	End     string `json:"end"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
	Reason  string `json:"reason"`
}

// ParseHistory reads a history's entries, as LRANGE answers them, in
// their order, skipping any it can't read.
func ParseHistory(runs []string) []Entry {
	out := make([]Entry, 0, len(runs))
	for _, s := range runs {
		var e Entry
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			continue
		}
		out = append(out, e)
	}
	return out
}
