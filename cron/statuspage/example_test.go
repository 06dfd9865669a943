package statuspage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/statuspage"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// requireOperator stands for the service's own authentication: the page
// has none.
func requireOperator(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="operators"`)
			http.Error(w, "operators only", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// This example runs a leased job, mounts the status page with its actions
// under /admin/cron/ behind the service's authentication, and reads the
// page's JSON.
func Example() {
	m, err := miniredis.Run() // a real Redis in production
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer client.Close()
	db := lock.NewDB(client)

	ran := make(chan struct{}, 1)
	job := cron.Func("hourly-report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error {
		ran <- struct{}{}
		return nil
	}, cron.WithLease(cron.LeaseConfig{DB: db}))
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("replica-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	<-ran

	mux := http.NewServeMux()
	page := statuspage.New(cron.NewAdmin(db), statuspage.WithActions())
	mux.Handle("/admin/cron/", requireOperator(http.StripPrefix("/admin/cron", page)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, _ := http.NewRequest("GET", srv.URL+"/admin/cron/?format=json&job=hourly-report", nil)
	req.SetBasicAuth("operator", "s3cret")
	for {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		var st cron.JobStatus
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		if st.Last == nil { // the run's end is recorded just after it returns
			time.Sleep(10 * time.Millisecond)
			continue
		}
		fmt.Println(res.Status, st.Job, st.Last.Replica, st.Last.Outcome)
		break
	}
	// Output: 200 OK hourly-report replica-1 ok
}
