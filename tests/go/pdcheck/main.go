// pdcheck asks a PD endpoint for its cluster ID and for timestamps with PD's own Go client
// (github.com/tikv/pd/client), and checks that the timestamps are strictly increasing.
//
// With -pause-at N it prints "paused" on stdout after N timestamps and waits for a line on
// stdin before it goes on, so a test can kill the TSO leader at a known point. Errors while a
// new leader is found are counted and retried until -deadline. The last line on stdout is a
// JSON summary; the exit code is 1 if any check failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	pd "github.com/tikv/pd/client"
)

type summary struct {
	ClusterID  uint64 `json:"cluster_id"`
	Timestamps int    `json:"timestamps"`
	Errors     int    `json:"errors"`
	Increasing bool   `json:"increasing"`
	Distinct   bool   `json:"distinct"`
	First      int64  `json:"first"`
	Last       int64  `json:"last"`
	LastError  string `json:"last_error,omitempty"`
}

func compose(physical, logical int64) int64 { return physical<<18 | logical }

func main() {
	urls := flag.String("pd-urls", "http://127.0.0.1:2379", "comma-separated PD endpoints")
	count := flag.Int("count", 3000, "timestamps to get, over all workers")
	workers := flag.Int("workers", 4, "goroutines asking concurrently (the client batches them)")
	pauseAt := flag.Int("pause-at", 0, "after this many timestamps print \"paused\" and wait for a stdin line")
	deadline := flag.Duration("deadline", 60*time.Second, "give up after this long")
	flag.Parse()

	client, err := pd.NewClient(strings.Split(*urls, ","), pd.SecurityOption{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pd client: %v\n", err)
		os.Exit(2)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()

	out := summary{ClusterID: client.GetClusterID(ctx), Increasing: true, Distinct: true}
	var mu sync.Mutex
	seen := make(map[int64]struct{}, *count)
	resume := make(chan struct{})
	taken := 0
	take := func() bool { // reserve one timestamp of the budget; pause once at -pause-at
		mu.Lock()
		defer mu.Unlock()
		if taken >= *count {
			return false
		}
		taken++
		if taken == *pauseAt+1 && *pauseAt > 0 {
			fmt.Println("paused")
			<-resume
		}
		return true
	}
	if *pauseAt > 0 {
		go func() {
			bufio.NewReader(os.Stdin).ReadString('\n')
			close(resume)
		}()
	}

	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev int64
			for take() {
				for {
					physical, logical, err := client.GetTS(ctx)
					if err != nil {
						mu.Lock()
						out.Errors++
						out.LastError = err.Error()
						mu.Unlock()
						if ctx.Err() != nil {
							return
						}
						time.Sleep(50 * time.Millisecond)
						continue
					}
					ts := compose(physical, logical)
					mu.Lock()
					if ts <= prev {
						out.Increasing = false
					}
					if _, dup := seen[ts]; dup {
						out.Distinct = false
					}
					seen[ts] = struct{}{}
					if out.First == 0 || ts < out.First {
						out.First = ts
					}
					if ts > out.Last {
						out.Last = ts
					}
					mu.Unlock()
					prev = ts
					break
				}
			}
		}()
	}
	wg.Wait()
	out.Timestamps = len(seen)
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	if !out.Increasing || !out.Distinct || out.Timestamps != *count || out.ClusterID == 0 {
		os.Exit(1)
	}
}
