package redistest

import (
	"testing"
)

// SetUser creates or changes the ACL user name with the words of rule, as ACL SETUSER takes
// them ("on", ">password", "~key*", "&channel", "+get", ...), through the rig's own
// connection as the default user, which keeps every permission. A client logs in as the user
// with the Username and Password of its options. SetUser fails the test with the server's
// error for a rule it refuses, such as an unknown command.
func (s *Server) SetUser(tb testing.TB, name string, rule ...string) {
	tb.Helper()
	args := []any{"ACL", "SETUSER", name}
	for _, w := range rule {
		args = append(args, w)
	}
	if err := s.adminClient().Do(tb.Context(), args...).Err(); err != nil {
		tb.Fatalf("redistest: ACL SETUSER %s %v on %s: %v", name, rule, s.Addr(), err)
	}
}

// SetUser sets the ACL user on every node of the cluster, as Server.SetUser does: each node
// keeps its own users.
func (c *Cluster) SetUser(tb testing.TB, name string, rule ...string) {
	tb.Helper()
	for _, n := range c.nodes {
		n.SetUser(tb, name, rule...)
	}
}
