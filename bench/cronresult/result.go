// Package cronresult is the record one cronbench run prints and benchrun
// reads back, shared so that the two can't drift apart.
package cronresult

// Result is what one run of cronbench prints, as JSON.
type Result struct {
	Lib  string  `json:"lib"`
	Mode string  `json:"mode"` // "second", "idle", "burst", "churn" or "leased"
	Jobs int     `json:"jobs"`
	For  float64 `json:"for_s"`
	// Due is how many of the jobs are due at each burst (mode burst).
	Due int `json:"due,omitempty"`
	// StartS is how long starting the scheduler with its jobs took: for
	// ours, Start, which also hands out the startup runs.
	StartS float64 `json:"start_s"`
	// CPUPerHourS is the CPU time (user + system) of the idle window,
	// scaled to an hour (mode idle).
	CPUPerHourS float64 `json:"cpu_per_idle_hour_s,omitempty"`
	// Early counts runs that started before they were due (mode burst).
	Early int64 `json:"early"`

	// CPU is the user and system time the process used from just before
	// the jobs were made until the end of the run, in seconds.
	UserS float64 `json:"user_s"`
	SysS  float64 `json:"sys_s"`

	// The heap in use (after a GC, between two ticks, the scheduler still
	// running) beyond what it was before the jobs were made, per job; the
	// same for live heap objects, and goroutine stacks.
	HeapInusePerJob float64 `json:"heap_inuse_per_job"`
	HeapAllocPerJob float64 `json:"heap_alloc_per_job"`
	StackPerJob     float64 `json:"stack_per_job"`
	Goroutines      int     `json:"goroutines"`

	// Runs counts every run; Startup the runs a scheduler makes at startup
	// rather than on a slot (ours runs each job once at Start), which have
	// no second boundary to be late for and are left out of the lateness.
	Runs    int64 `json:"runs"`
	Startup int64 `json:"startup"`
	// Lateness of the slot runs: start minus the second it was due, in µs.
	LateP50 float64 `json:"late_p50_us"`
	LateP99 float64 `json:"late_p99_us"`
	LateMax float64 `json:"late_max_us"`
	// Dropped counts runs whose lateness did not fit in the recorder.
	Dropped int64 `json:"dropped"`
	// StopS is how long stopping the scheduler took.
	StopS float64 `json:"stop_s"`

	// Mode churn: how many jobs were added, then removed, one at a time,
	// the mean time of each, and the heap per job after each step
	// (HeapInusePerJob is the one after the start). ParseEach says that
	// each job's spec was parsed for it, as a job read from a database
	// is, rather than shared as one package-level Interval.
	Changed               int     `json:"changed,omitempty"`
	ParseEach             bool    `json:"parse_each,omitempty"`
	AddUS                 float64 `json:"add_us,omitempty"`
	RemoveUS              float64 `json:"remove_us,omitempty"`
	HeapAfterAddPerJob    float64 `json:"heap_after_add_per_job,omitempty"`
	HeapAfterRemovePerJob float64 `json:"heap_after_remove_per_job,omitempty"`

	// Mode leased: the spread of the jobs' starts over each slot, in
	// seconds (0: none), and what redis-server used meanwhile: its CPU
	// time over the window, and the most it used in any second, as a
	// share of one core; and how many ticks were skipped.
	SpreadS        float64          `json:"spread_s,omitempty"`
	RedisCPUS      float64          `json:"redis_cpu_s,omitempty"`
	RedisPeakCPU   float64          `json:"redis_peak_cpu,omitempty"`
	Skipped        int64            `json:"skipped,omitempty"`
	SkipReasons    map[string]int64 `json:"skip_reasons,omitempty"`
	LeasedRunsPerS float64          `json:"leased_runs_per_s,omitempty"`
}

// Cluster is what one run of clustercost prints, as JSON: one scheduler on
// several replicas running the same jobs, each due every second, against
// one redis-server.
type Cluster struct {
	Lib      string `json:"lib"`
	Replicas int    `json:"replicas"`
	// Masters is how many masters the Redis Cluster had; 0 for one
	// redis-server.
	Masters int     `json:"masters,omitempty"`
	Jobs    int     `json:"jobs"`
	For     float64 `json:"for_s"`
	// Slots is jobs × the whole seconds of the window: the job-slots due.
	Slots int64 `json:"slots"`
	// Once, Twice and Missed count the job-slots that ran once, more than
	// once, or never, all replicas together.
	Once   int64 `json:"once"`
	Twice  int64 `json:"twice"`
	Missed int64 `json:"missed"`
	// ServerUS is the server's time for the commands the clients sent in
	// the window, in µs (INFO commandstats; a script's own commands are
	// inside its time); Commands is how many they sent, by name.
	ServerUS float64          `json:"server_us"`
	Commands map[string]int64 `json:"commands"`
	// Server is every command the server counted in the window, scripts'
	// own commands too: its calls and µs.
	Server map[string][2]float64 `json:"server"`
	// LookUS is the server's time for one look of ours (E13: an HMGET of
	// two fields of a record, which writes nothing), measured on the
	// window's records after it: the scripts send HMGETs too, so the
	// window's HMGET time is not the looks' alone. ServerUS counts the
	// looks at this cost, and every other command that the clients and
	// the scripts both send at its average cost.
	LookUS float64 `json:"look_us,omitempty"`
	// RedisCPUS is the server's CPU time in the window, user and system.
	RedisCPUS float64 `json:"redis_cpu_s"`
	// LateP50 and LateP99 are how late the window's runs began after their
	// second, in µs.
	LateP50 float64 `json:"late_p50_us"`
	LateP99 float64 `json:"late_p99_us"`
	// Skips counts ours' skipped ticks in the window, by reason, all
	// replicas together.
	Skips map[string]int64 `json:"skips,omitempty"`
}
