// Command wakuwaku is the operators' tool for the jobs and locks of
// services built on wakuwaku: it reads and steers the cron jobs' records
// and lists or force-releases the locks held in a Redis.
//
//	wakuwaku [flags] command [args] [flags]
//
//	status [-json] [job]   the leased jobs: last slot, replica, outcome, duration,
//	                       last failure, running now and since when, paused, next due
//	pause JOB              pause the job on every replica
//	resume JOB             resume it
//	run JOB                ask for one run now (one replica runs it)
//	locks [-namespace NS]  the locks held now, with their remaining TTL
//	release [-force] KEY   show, and with -force delete, a stuck lock's key
//
// The flags that say which Redis to talk to may come before the command or
// after it, among its arguments (wakuwaku status -redis URL works as
// wakuwaku -redis URL status does); a flag that neither the tool nor the
// command takes is refused, never ignored. An argument that begins with a
// dash (a job named -x) goes after --.
//
// -redis takes a redis:// or rediss:// URL, as the example's flag does
// (default redis://127.0.0.1:6379), or a bare host:port (the form of
// redis.Options.Addr) for redis://host:port, with the user and password of a Redis
// ACL user if the server has them (redis://user:password@host:6379);
// -cluster takes one for a Redis Cluster, with more seed nodes as addr=
// parameters: redis://host1:6379?addr=host2:6379. Over rediss://, -cacert
// names the PEM file of the certificate authorities to trust instead of
// the system's, and -cert and -key a client certificate, for a server that
// asks for one.
//
// An error prints one line and exits with status 1; under status -json
// it prints {"error": "…"} to standard output instead, for the reader of
// the JSON. Bad usage prints one line saying what was wrong and a pointer
// to -h, and exits with status 2; -h prints the usage and exits with
// status 0. pause of a paused job and resume of one that is not paused
// say so and exit with status 0; release without -force shows what
// -force would delete and exits with status 0.
//
// status -json prints the records as [cron.JobStatus] values marshal, text
// as it is (no HTML escaping): times in RFC 3339, a run's duration as
// durationMs, whole milliseconds.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func main() {
	// go-redis logs each failed dial on its own; the tool says what failed
	// in one line.
	redis.SetLogger(quiet{})
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// quiet is a go-redis logger that drops what it is given.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// usageError is a command line that can't be run: the tool says what was
// wrong and where the usage is.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// globals are the flags that say which Redis to talk to, taken before the
// command and after it.
type globals struct {
	url, clusterURL   string
	timeout           time.Duration
	cacert, cert, key string
}

// target is the URL of the Redis to talk to.
func (g *globals) target() string {
	if g.clusterURL != "" {
		return g.clusterURL
	}
	return g.url
}

// define adds the global flags to fs, each with its current value as its
// default, so that a command's flag set does not reset what the flags
// before the command said.
func (g *globals) define(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "redis", g.url, "the Redis server's `URL`: redis://[user:password@]host:port[/db], or rediss:// for TLS")
	fs.StringVar(&g.clusterURL, "cluster", g.clusterURL, "a Redis Cluster's `URL`, more seed nodes as addr= parameters")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long")
	fs.StringVar(&g.cacert, "cacert", g.cacert, "over rediss://, trust the certificate authorities in this PEM `file` instead of the system's")
	fs.StringVar(&g.cert, "cert", g.cert, "over rediss://, present the client certificate in this PEM `file` (with -key)")
	fs.StringVar(&g.key, "key", g.key, "the client certificate's private key, a PEM `file`")
}

// commands are the tool's commands, in the order the usage lists them.
var commands = []struct {
	name, args, what string
}{
	{"status", "[-json] [job]", "the leased jobs' records: last run, last failure, running, paused, next due"},
	{"pause", "JOB", "pause the job on every replica"},
	{"resume", "JOB", "resume it"},
	{"run", "JOB", "ask for one run now"},
	{"locks", "[-namespace NS]", "the locks held now"},
	{"release", "[-force] KEY", "show a lock's key (a Lock's, or an RwLock's :w or :r), and with -force delete it"},
}

// invocation is a parsed command line.
type invocation struct {
	g         globals
	cmd       string
	args      []string // the command's positional arguments
	asJSON    bool     // status -json
	namespace string   // locks -namespace
	force     bool     // release -force
}

// run runs the tool with args and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	inv, err := parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "wakuwaku: %v\nRun 'wakuwaku -h' for usage.\n", err)
		return 2
	}
	client, err := connect(inv.g)
	if err != nil {
		fmt.Fprintf(stderr, "wakuwaku: %v\n", err)
		return 1
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, inv.g.timeout)
	defer cancel()
	t := &tool{rdb: client, db: lock.NewDB(client), out: stdout}
	if err := t.do(ctx, inv); err != nil {
		if inv.asJSON {
			// A reader of the JSON gets an object it can parse, on the
			// stream it reads.
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(struct {
				Error string `json:"error"`
			}{oneLine(err.Error())})
			return 1
		}
		fmt.Fprintf(stderr, "wakuwaku: %v\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

// parse reads the command line: the global flags, the command, and the
// command's arguments with its own flags and the global ones among them.
func parse(args []string) (*invocation, error) {
	inv := &invocation{g: globals{url: "redis://127.0.0.1:6379", timeout: 10 * time.Second}}
	top := newFlagSet("wakuwaku")
	inv.g.define(top)
	if err := top.Parse(args); err != nil {
		return nil, flagError(err)
	}
	if top.NArg() == 0 {
		return nil, usagef("no command: want one of %s", commandNames())
	}
	inv.cmd = top.Arg(0)
	if inv.cmd == "help" {
		return nil, flag.ErrHelp
	}
	if !slices.ContainsFunc(commands, func(c struct{ name, args, what string }) bool { return c.name == inv.cmd }) {
		return nil, usagef("no command %q: want one of %s", inv.cmd, commandNames())
	}
	fs := newFlagSet(inv.cmd)
	inv.g.define(fs)
	switch inv.cmd {
	case "status":
		fs.BoolVar(&inv.asJSON, "json", false, "")
	case "locks":
		fs.StringVar(&inv.namespace, "namespace", "", "")
	case "release":
		fs.BoolVar(&inv.force, "force", false, "")
	}
	rest, err := interleaved(fs, top.Args()[1:])
	if err != nil {
		return nil, flagError(fmt.Errorf("%s: %w", inv.cmd, err))
	}
	inv.args = rest
	redisSet := false
	for _, fs := range []*flag.FlagSet{top, fs} {
		fs.Visit(func(f *flag.Flag) { redisSet = redisSet || f.Name == "redis" })
	}
	switch {
	case redisSet && inv.g.clusterURL != "":
		return nil, usagef("-redis and -cluster both given: want one Redis")
	case inv.g.timeout <= 0:
		return nil, usagef("-timeout %v: want more than 0", inv.g.timeout)
	case (inv.g.cert == "") != (inv.g.key == ""):
		return nil, usagef("-cert and -key go together: give both or neither")
	case (inv.g.cacert != "" || inv.g.cert != "") && !strings.HasPrefix(inv.g.target(), "rediss://"):
		return nil, usagef("-cacert, -cert and -key are for TLS: want a rediss:// URL")
	}
	if err := inv.g.checkURL(); err != nil {
		return nil, err
	}
	return inv, checkArgs(inv)
}

// checkURL makes a bare host:port, the form of redis.Options.Addr, a
// redis:// URL, and refuses a URL that go-redis can't read as a usage
// error that says what it wants.
func (g *globals) checkURL() error {
	flagName, url := "-redis", &g.url
	if g.clusterURL != "" {
		flagName, url = "-cluster", &g.clusterURL
	}
	if !strings.Contains(*url, "://") {
		*url = "redis://" + *url
	}
	var err error
	if g.clusterURL != "" {
		_, err = redis.ParseClusterURL(*url)
	} else {
		_, err = redis.ParseURL(*url)
	}
	if err != nil {
		return usagef("%s %q: want host:port or a redis:// or rediss:// URL (%v)", flagName, strings.TrimPrefix(*url, "redis://"), err)
	}
	return nil
}

// checkArgs checks the number of the command's positional arguments.
func checkArgs(inv *invocation) error {
	n := len(inv.args)
	switch inv.cmd {
	case "status":
		if n > 1 {
			return usagef("status takes one job at most, got %d: %s", n, quoted(inv.args))
		}
	case "pause", "resume", "run":
		if n != 1 {
			return usagef("%s takes one job name, got %d%s", inv.cmd, n, listed(inv.args))
		}
	case "locks":
		if n != 0 {
			return usagef("locks takes no arguments, got %s", quoted(inv.args))
		}
	case "release":
		if n != 1 {
			return usagef("release takes one key, got %d%s", n, listed(inv.args))
		}
	}
	return nil
}

// newFlagSet returns a flag set that reports its errors to its caller
// instead of printing the usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// flagError makes a flag package error a usage error, keeping -h.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
}

// interleaved parses args with fs, flags and positional arguments in any
// order, and returns the positional ones. Everything after -- is
// positional.
func interleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// listed shows args after a count: "" for none, ": a, b" else.
func listed(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return ": " + quoted(args)
}

func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// oneLine keeps an error to one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: wakuwaku [flags] command [args] [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-29s %s\n", c.name+" "+c.args, c.what)
	}
	fmt.Fprint(w, "\nflags, before the command or among its arguments:\n")
	fs := newFlagSet("wakuwaku")
	g := globals{url: "redis://127.0.0.1:6379", timeout: 10 * time.Second}
	g.define(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nAn argument that begins with a dash goes after --: wakuwaku pause -- -odd-job\n")
}

// connect returns a client for the URL, or for the cluster URL if given,
// with the TLS files of g.
func connect(g globals) (redis.UniversalClient, error) {
	if g.clusterURL != "" {
		opts, err := redis.ParseClusterURL(g.clusterURL)
		if err != nil {
			return nil, fmt.Errorf("-cluster %q: %w", g.clusterURL, err)
		}
		if opts.TLSConfig, err = withFiles(opts.TLSConfig, g); err != nil {
			return nil, err
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(g.url)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: %w", g.url, err)
	}
	if opts.TLSConfig, err = withFiles(opts.TLSConfig, g); err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

// withFiles adds the certificate files of g to c, the TLS configuration of
// a rediss:// URL (nil for redis://, which takes none).
func withFiles(c *tls.Config, g globals) (*tls.Config, error) {
	if g.cacert == "" && g.cert == "" {
		return c, nil
	}
	if c == nil { // parse made sure of a rediss:// URL
		return nil, errors.New("-cacert, -cert and -key are for TLS: want a rediss:// URL")
	}
	if g.cacert != "" {
		pem, err := os.ReadFile(g.cacert)
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", g.cacert)
		}
		c.RootCAs = pool
	}
	if g.cert != "" {
		pair, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("-cert and -key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// tool runs the commands over one client.
type tool struct {
	rdb redis.UniversalClient
	db  lock.DB
	out io.Writer
}

func (t *tool) do(ctx context.Context, inv *invocation) error {
	if err := t.db.Ping(ctx); err != nil {
		if errors.Is(err, io.EOF) && !strings.HasPrefix(inv.g.target(), "rediss://") {
			// What a TLS-only server does to a client that speaks in the clear.
			return fmt.Errorf("%w: the server closed the connection; if it speaks TLS only, give a rediss:// URL", err)
		}
		return err
	}
	admin := cron.NewAdmin(t.db)
	switch inv.cmd {
	case "status":
		return t.status(ctx, admin, inv.args, inv.asJSON)
	case "pause", "resume", "run":
		return t.control(ctx, admin, inv.cmd, inv.args[0])
	case "locks":
		return t.locks(ctx, inv.namespace)
	case "release":
		return t.release(ctx, inv.args[0], inv.force)
	}
	return fmt.Errorf("no command %q", inv.cmd) // parse let through a command it does not know
}

func (t *tool) control(ctx context.Context, admin cron.Admin, cmd, job string) error {
	var err error
	var done string
	switch cmd {
	case "pause", "resume":
		// Pausing a paused job or resuming a running one changes nothing:
		// say so, rather than that it was done. The record is read first,
		// so an operator at the same moment may have changed it since.
		st, err := admin.Status(ctx, job)
		if err != nil {
			return err
		}
		switch {
		case cmd == "pause" && st.Paused:
			fmt.Fprintf(t.out, "%s: already paused, since %s\n", printable(job), clock(st.PausedAt))
			return nil
		case cmd == "resume" && !st.Paused:
			fmt.Fprintf(t.out, "%s: not paused, nothing to resume\n", printable(job))
			return nil
		case cmd == "pause":
			err, done = admin.Pause(ctx, job), "paused"
		default:
			err, done = admin.Resume(ctx, job), "resumed"
		}
		if err != nil {
			return err
		}
	case "run":
		if err = admin.RunNow(ctx, job); err != nil {
			return err
		}
		done = "asked to run now"
	}
	fmt.Fprintf(t.out, "%s: %s\n", printable(job), done)
	return nil
}
