// binlogreader reads a drainer's Kafka topic with TiDB's own secondary-binlog reader
// (tidb-binlog/driver/reader) and prints each message it reads as one JSON line on stdout.
//
// Usage: binlogreader -brokers 127.0.0.1:9092 -topic 42_obinlog -count 10 [-commit-ts N]
// It exits 0 after -count messages, 1 on an error, and 2 when no message came for -idle.
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pingcap/tidb/tidb-binlog/driver/reader"
	pb "github.com/pingcap/tidb/tidb-binlog/proto/go-binlog"
)

type column struct {
	Null   bool     `json:"null,omitempty"`
	Int    *int64   `json:"int,omitempty"`
	Uint   *uint64  `json:"uint,omitempty"`
	Double *float64 `json:"double,omitempty"`
	Bytes  *string  `json:"bytes,omitempty"` // base64
	String *string  `json:"string,omitempty"`
}

type mutation struct {
	Type      string   `json:"type"`
	Row       []column `json:"row"`
	ChangeRow []column `json:"change_row,omitempty"`
}

type table struct {
	Schema     string     `json:"schema"`
	Table      string     `json:"table"`
	Columns    []string   `json:"columns"`
	Types      []string   `json:"types"`
	UniqueKeys []string   `json:"unique_keys"`
	Mutations  []mutation `json:"mutations"`
}

type line struct {
	Offset   int64   `json:"offset"`
	CommitTS int64   `json:"commit_ts"`
	Type     string  `json:"type"`
	Schema   string  `json:"schema,omitempty"`
	Table    string  `json:"ddl_table,omitempty"`
	DDL      string  `json:"ddl,omitempty"`
	Tables   []table `json:"tables,omitempty"`
}

func columns(r *pb.Row) []column {
	out := make([]column, 0, len(r.GetColumns()))
	for _, c := range r.GetColumns() {
		var col column
		switch {
		case c.GetIsNull():
			col.Null = true
		case c.Int64Value != nil:
			col.Int = c.Int64Value
		case c.Uint64Value != nil:
			col.Uint = c.Uint64Value
		case c.DoubleValue != nil:
			col.Double = c.DoubleValue
		case c.BytesValue != nil:
			b := base64.StdEncoding.EncodeToString(c.BytesValue)
			col.Bytes = &b
		case c.StringValue != nil:
			col.String = c.StringValue
		}
		out = append(out, col)
	}
	return out
}

func convert(m *reader.Message) line {
	b := m.Binlog
	out := line{Offset: m.Offset, CommitTS: b.GetCommitTs(), Type: b.GetType().String()}
	if b.GetType() == pb.BinlogType_DDL {
		d := b.GetDdlData()
		out.Schema, out.Table, out.DDL = d.GetSchemaName(), d.GetTableName(), string(d.GetDdlQuery())
		return out
	}
	for _, t := range b.GetDmlData().GetTables() {
		tb := table{Schema: t.GetSchemaName(), Table: t.GetTableName()}
		for _, ci := range t.GetColumnInfo() {
			tb.Columns = append(tb.Columns, ci.GetName())
			tb.Types = append(tb.Types, ci.GetMysqlType())
		}
		for _, k := range t.GetUniqueKeys() {
			tb.UniqueKeys = append(tb.UniqueKeys, k.GetName()+"("+strings.Join(k.GetColumnNames(), ",")+")")
		}
		for _, mu := range t.GetMutations() {
			mt := mutation{Type: mu.GetType().String(), Row: columns(mu.GetRow())}
			if mu.ChangeRow != nil {
				mt.ChangeRow = columns(mu.GetChangeRow())
			}
			tb.Mutations = append(tb.Mutations, mt)
		}
		out.Tables = append(out.Tables, tb)
	}
	return out
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma separated brokers")
	topic := flag.String("topic", "", "topic (default <cluster-id>_obinlog)")
	clusterID := flag.String("cluster-id", "", "cluster id, for the default topic")
	commitTS := flag.Int64("commit-ts", 0, "read messages with a commit ts above this")
	count := flag.Int("count", 0, "exit after this many messages (0: never)")
	idle := flag.Duration("idle", 60*time.Second, "exit 2 when no message came for this long")
	flag.Parse()

	r, err := reader.NewReader(&reader.Config{
		KafkaAddr: strings.Split(*brokers, ","),
		CommitTS:  *commitTS,
		Topic:     *topic,
		ClusterID: *clusterID,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "binlogreader:", err)
		os.Exit(1)
	}
	defer r.Close()
	enc := json.NewEncoder(os.Stdout)
	for n := 0; *count == 0 || n < *count; n++ {
		select {
		case m := <-r.Messages():
			if err := enc.Encode(convert(m)); err != nil {
				fmt.Fprintln(os.Stderr, "binlogreader:", err)
				os.Exit(1)
			}
		case <-time.After(*idle):
			fmt.Fprintf(os.Stderr, "binlogreader: no message for %s after %d\n", *idle, n)
			os.Exit(2)
		}
	}
}
