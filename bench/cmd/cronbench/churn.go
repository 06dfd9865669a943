package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-co-op/gocron/v2"
	robfig "github.com/robfig/cron/v3"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// specJob is a job of our runtime that holds the Interval its own spec
// parsed to, as a job read from a database does.
type specJob struct {
	name  string
	every interval.Interval
}

func (j *specJob) Name() string                { return j.name }
func (j *specJob) Interval() interval.Interval { return j.every }
func (j *specJob) Process(_ context.Context, t cron.Tick) error {
	return record(t)
}

// churner is a scheduler that can add and remove jobs while it runs.
type churner struct {
	add    func(i int) error
	remove func(i int) error
	stop   func() error
}

// startChurner starts lib's scheduler with n idle jobs on spec, job i
// named job-<i>, and returns how to add job-<i> (i ≥ n) and remove any.
func startChurner(lib string, n int, spec string, parseEach bool) (churner, error) {
	switch lib {
	case "ours":
		every := func() interval.Interval { return ourEvery }
		if parseEach {
			every = func() interval.Interval { return interval.MustCron(spec).WithoutStartupRun() }
		}
		jobs := make([]cron.Job, n)
		for i := range jobs {
			jobs[i] = &specJob{name: "job-" + strconv.Itoa(i), every: every()}
		}
		rt, err := cron.Start(jobs)
		if err != nil {
			return churner{}, err
		}
		ctx := context.Background()
		return churner{
			add:    func(i int) error { return rt.Add(&specJob{name: "job-" + strconv.Itoa(i), every: every()}) },
			remove: func(i int) error { return rt.Remove(ctx, "job-"+strconv.Itoa(i)) },
			stop:   func() error { return rt.Shutdown(ctx) },
		}, nil
	case "robfig":
		c := robfig.New(robfig.WithSeconds())
		ids := make(map[int]robfig.EntryID, n)
		task := func() { rec.add(0) }
		for i := range n {
			id, err := c.AddFunc(spec, task)
			if err != nil {
				return churner{}, err
			}
			ids[i] = id
		}
		c.Start()
		return churner{
			add: func(i int) error {
				id, err := c.AddFunc(spec, task)
				ids[i] = id
				return err
			},
			remove: func(i int) error { c.Remove(ids[i]); delete(ids, i); return nil },
			stop:   func() error { <-c.Stop().Done(); return nil },
		}, nil
	case "gocron":
		s, err := gocron.NewScheduler()
		if err != nil {
			return churner{}, err
		}
		ids := make(map[int]gocron.Job, n)
		task := gocron.NewTask(func() { rec.add(0) })
		add := func(i int) error {
			j, err := s.NewJob(gocron.CronJob(spec, true), task)
			ids[i] = j
			return err
		}
		for i := range n {
			if err := add(i); err != nil {
				return churner{}, err
			}
		}
		s.Start()
		return churner{
			add:    add,
			remove: func(i int) error { err := s.RemoveJob(ids[i].ID()); delete(ids, i); return err },
			stop:   s.Shutdown,
		}, nil
	}
	return churner{}, fmt.Errorf("unknown -lib %q (want ours, gocron or robfig)", lib)
}

// runChurn starts n idle jobs, then adds k more and removes k of the
// first, one at a time, and reports the time per Add and per Remove and
// the heap per job after each step.
func runChurn(lib string, n, k int, parseEach bool) error {
	spec := dailySpec(time.Now())
	ourEvery, noStartup = interval.MustCron(spec).WithoutStartupRun(), true
	base := memStats()
	began := time.Now()
	c, err := startChurner(lib, n, spec, parseEach)
	if err != nil {
		return err
	}
	res := cronresult.Result{Lib: lib, Mode: "churn", Jobs: n, Changed: k, ParseEach: parseEach, StartS: time.Since(began).Seconds()}
	started := memStats()
	res.HeapInusePerJob = float64(int64(started.HeapInuse)-int64(base.HeapInuse)) / float64(n)

	began = time.Now()
	for i := n; i < n+k; i++ {
		if err := c.add(i); err != nil {
			return err
		}
	}
	res.AddUS = float64(time.Since(began).Microseconds()) / float64(k)
	added := memStats()
	res.HeapAfterAddPerJob = float64(int64(added.HeapInuse)-int64(base.HeapInuse)) / float64(n+k)

	began = time.Now()
	for i := range k {
		if err := c.remove(i); err != nil {
			return err
		}
	}
	res.RemoveUS = float64(time.Since(began).Microseconds()) / float64(k)
	removed := memStats()
	res.HeapAfterRemovePerJob = float64(int64(removed.HeapInuse)-int64(base.HeapInuse)) / float64(n)
	if err := c.stop(); err != nil {
		return err
	}
	return emit(res)
}
