// pumpwriter writes binlogs the way TiDB does, through TiDB's own pump client
// (github.com/pingcap/tidb/tidb-binlog/pump_client), with timestamps from PD's Go client.
//
// Each of -writers goroutines runs transactions: start ts from PD, a prewrite binlog whose
// PrewriteValue inserts one row into table -table-id (schema version -schema-version), a
// commit ts from PD, the commit binlog. The row is (id BIGINT PRIMARY KEY, v VARCHAR) in
// TiDB's old row format, encoded with TiDB's own tablecodec; ids are -first-id, -first-id+1,
// ... and v is value(id) (see below), so a test can rebuild every expected row. It runs for
// -count transactions or for -duration, whichever ends first, and prints one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/tidb/sessionctx/stmtctx"
	"github.com/pingcap/tidb/tablecodec"
	pumpcli "github.com/pingcap/tidb/tidb-binlog/pump_client"
	"github.com/pingcap/tidb/types"
	"github.com/pingcap/tidb/util/codec"
	pb "github.com/pingcap/tipb/go-binlog"
	pd "github.com/tikv/pd/client"
)

type summary struct {
	ClusterID uint64  `json:"cluster_id"`
	Committed int64   `json:"committed"` // transactions whose prewrite and commit were written
	Binlogs   int64   `json:"binlogs"`   // binlogs written (prewrite + commit)
	Failures  int64   `json:"failures"`  // WriteBinlog calls that returned an error
	FirstID   int64   `json:"first_id"`
	FailedIDs []int64 `json:"failed_ids"` // ids whose prewrite failed (no row, no commit)
	// ids whose commit binlog the pump client gave up on (after its 10 minutes of retries):
	// TiDB's transaction would have committed, so such a row is lost to the drainer
	CommitFailedIDs []int64 `json:"commit_failed_ids"`
	LastID          int64   `json:"last_id"` // the highest id attempted
	MaxCommitTS     int64   `json:"max_commit_ts"`
	ElapsedS        float64 `json:"elapsed_s"`
	PairsPerS       float64 `json:"pairs_per_s"`
	PairP50Ms       float64 `json:"pair_p50_ms"` // prewrite + commit, timestamps excluded
	PairP99Ms       float64 `json:"pair_p99_ms"`
}

// value is the v column of row id: "row-<id>:" then one letter repeated up to size bytes.
func value(id int64, size int) string {
	head := fmt.Sprintf("row-%d:", id)
	if len(head) >= size {
		return head
	}
	return head + strings.Repeat(string(rune('a'+id%26)), size-len(head))
}

func encodeRow(sc *stmtctx.StatementContext, id int64, size int) ([]byte, error) {
	handle, err := codec.EncodeValue(sc, nil, types.NewIntDatum(id))
	if err != nil {
		return nil, err
	}
	row := []types.Datum{types.NewIntDatum(id), types.NewStringDatum(value(id, size))}
	// TiDB's binlog insert row: the handle datum, then the old-format row (EncodeOldRow reuses
	// its buffer argument from the start, so the two are encoded apart and joined)
	value, err := tablecodec.EncodeOldRow(sc, row, []int64{1, 2}, nil, nil)
	if err != nil {
		return nil, err
	}
	return append(handle, value...), nil
}

func ts(ctx context.Context, client pd.Client) (int64, error) {
	physical, logical, err := client.GetTS(ctx)
	return physical<<18 | logical, err
}

func main() {
	urls := flag.String("pd-urls", "http://127.0.0.1:2379", "comma-separated PD (or binlog-tso) endpoints")
	strategy := flag.String("strategy", "range", "pump selection: range or hash")
	writers := flag.Int("writers", 8, "concurrent writers")
	count := flag.Int64("count", 0, "transactions to write in all (0: until -duration ends)")
	duration := flag.Duration("duration", 0, "stop starting transactions after this long (0: until -count)")
	tableID := flag.Int64("table-id", 0, "table the rows go to (id BIGINT PRIMARY KEY, v VARCHAR)")
	version := flag.Int64("schema-version", 0, "schema version the rows are encoded at")
	firstID := flag.Int64("first-id", 1, "id of the first row")
	size := flag.Int("value-size", 1024, "bytes of the v column")
	timeout := flag.Duration("write-timeout", 15*time.Second, "the pump client's binlog write timeout")
	flag.Parse()
	if *count == 0 && *duration == 0 {
		fmt.Fprintln(os.Stderr, "give -count or -duration")
		os.Exit(2)
	}

	pdClient, err := pd.NewClient(strings.Split(*urls, ","), pd.SecurityOption{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pd client: %v\n", err)
		os.Exit(2)
	}
	defer pdClient.Close()
	pumps, err := pumpcli.NewPumpsClient(*urls, *strategy, *timeout, pd.SecurityOption{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pump client: %v\n", err)
		os.Exit(2)
	}
	defer pumps.Close()

	ctx := context.Background()
	var stopAt time.Time
	if *duration > 0 {
		stopAt = time.Now().Add(*duration)
	}
	out := summary{ClusterID: pumps.ClusterID, FirstID: *firstID, FailedIDs: []int64{}, CommitFailedIDs: []int64{}}
	var next, committed, binlogs, failures, maxCommit atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	start := time.Now()

	var wg sync.WaitGroup
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := &stmtctx.StatementContext{TimeZone: time.UTC}
			for {
				if !stopAt.IsZero() && time.Now().After(stopAt) {
					return
				}
				n := next.Add(1) - 1
				if *count > 0 && n >= *count {
					return
				}
				id := *firstID + n
				row, err := encodeRow(sc, id, *size)
				if err != nil {
					fmt.Fprintf(os.Stderr, "encode row %d: %v\n", id, err)
					os.Exit(2)
				}
				mutation := pb.TableMutation{
					TableId:      *tableID,
					InsertedRows: [][]byte{row},
					Sequence:     []pb.MutationType{pb.MutationType_Insert},
				}
				prewrite := pb.PrewriteValue{SchemaVersion: *version, Mutations: []pb.TableMutation{mutation}}
				value, err := prewrite.Marshal()
				if err != nil {
					fmt.Fprintf(os.Stderr, "marshal: %v\n", err)
					os.Exit(2)
				}
				startTS, err := ts(ctx, pdClient)
				if err != nil {
					failures.Add(1)
					mu.Lock()
					out.FailedIDs = append(out.FailedIDs, id)
					mu.Unlock()
					continue
				}
				began := time.Now()
				p := &pb.Binlog{Tp: pb.BinlogType_Prewrite, StartTs: startTS, PrewriteKey: []byte(fmt.Sprint(id)), PrewriteValue: value}
				if err := pumps.WriteBinlog(p); err != nil {
					fmt.Fprintf(os.Stderr, "prewrite %d: %v\n", id, err)
					failures.Add(1)
					mu.Lock()
					out.FailedIDs = append(out.FailedIDs, id)
					mu.Unlock()
					continue
				}
				binlogs.Add(1)
				pairTook := time.Since(began)
				commitTS, err := ts(ctx, pdClient)
				for err != nil { // TiDB would have to roll back; we retry: the row must land
					failures.Add(1)
					time.Sleep(100 * time.Millisecond)
					commitTS, err = ts(ctx, pdClient)
				}
				began = time.Now()
				c := &pb.Binlog{Tp: pb.BinlogType_Commit, StartTs: startTS, CommitTs: commitTS}
				if err := pumps.WriteBinlog(c); err != nil {
					fmt.Fprintf(os.Stderr, "commit %d: %v\n", id, err)
					failures.Add(1)
					mu.Lock()
					out.CommitFailedIDs = append(out.CommitFailedIDs, id)
					mu.Unlock()
					continue
				}
				pairTook += time.Since(began)
				binlogs.Add(1)
				committed.Add(1)
				for {
					old := maxCommit.Load()
					if commitTS <= old || maxCommit.CompareAndSwap(old, commitTS) {
						break
					}
				}
				mu.Lock()
				latencies = append(latencies, pairTook)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	elapsed := time.Since(start)
	out.Committed, out.Binlogs, out.Failures = committed.Load(), binlogs.Load(), failures.Load()
	out.LastID = *firstID + next.Load() - 1
	if *count > 0 && out.LastID >= *firstID+*count {
		out.LastID = *firstID + *count - 1
	}
	out.MaxCommitTS = maxCommit.Load()
	out.ElapsedS = elapsed.Seconds()
	out.PairsPerS = float64(out.Committed) / elapsed.Seconds()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	out.PairP50Ms, out.PairP99Ms = percentile(latencies, 0.50), percentile(latencies, 0.99)
	sort.Slice(out.FailedIDs, func(i, j int) bool { return out.FailedIDs[i] < out.FailedIDs[j] })
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(q*float64(len(sorted)-1))].Microseconds()) / 1000
}
