package cronsim

// I11: a replica's batching client sends a batch of completions, at the
// head of its queue, after at most completionsBound batches of claims and
// looks went first: a backlog of claims delays a run's completion by a few
// batches, never for as long as the backlog lasts.
func (c *checker) batches() {
	for _, s := range c.h.Starved {
		c.add("I11", "completions starved", "", s.At,
			"a batch of completions waited at the head of its queue while %d batches of claims and looks went first (the bound is %d)",
			s.Passed, completionsBound)
	}
}
