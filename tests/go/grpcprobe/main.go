// grpcprobe calls gRPC methods on one address with grpc-go and prints, as one JSON line, the
// status code and message grpc-go saw for each call, so a test can check what a Go client (TiDB's
// pump client, PD's client, a Go drainer) makes of our servers' replies, error replies above all.
//
// Usage: grpcprobe -addr 127.0.0.1:8250 /binlog.Pump/WriteBinlog=0801 /no.Such/Method
//
// Each argument is a full method path and, after "=", the request message as hex (empty when
// left out); the message is sent as it is, so undecodable requests can be sent too. The calls
// are unary (grpc-go's ClientConn.Invoke) on one connection, in order. The codec registered
// under the name "proto" passes bytes through, so the requests carry grpc-go's default
// content-type "application/grpc" as the generated clients' do. Exit code 0 when every call got
// an answer (whatever its status), 2 on bad arguments.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
)

// rawCodec sends and receives messages as the bytes they are (*[]byte or []byte).
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*m = append((*m)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

type result struct {
	Method  string `json:"method"`
	Code    string `json:"code"`
	CodeNum uint32 `json:"code_num"`
	Message string `json:"message"`
	Reply   string `json:"reply,omitempty"` // the reply message as hex, for an OK call
}

type call struct {
	method  string
	request []byte
}

func parse(args []string) ([]call, error) {
	calls := make([]call, 0, len(args))
	for _, arg := range args {
		method, payload, _ := strings.Cut(arg, "=")
		if !strings.HasPrefix(method, "/") {
			return nil, fmt.Errorf("%q: a method path starts with /", arg)
		}
		request, err := hex.DecodeString(payload)
		if err != nil {
			return nil, fmt.Errorf("%q: the request is not hex: %v", arg, err)
		}
		calls = append(calls, call{method, request})
	}
	return calls, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8250", "host:port of the gRPC server")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each call")
	flag.Parse()
	calls, err := parse(flag.Args())
	if err != nil || len(calls) == 0 {
		fmt.Fprintf(os.Stderr, "grpcprobe: %v; usage: grpcprobe -addr HOST:PORT /pkg.Service/Method[=HEX]...\n", err)
		os.Exit(2)
	}
	encoding.RegisterCodec(rawCodec{})
	conn, err := grpc.Dial(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "grpcprobe: dial %s: %v\n", *addr, err)
		os.Exit(1)
	}
	defer conn.Close()

	results := make([]result, 0, len(calls))
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		var reply []byte
		err := conn.Invoke(ctx, c.method, c.request, &reply)
		cancel()
		st := status.Convert(err) // OK for a nil error
		r := result{Method: c.method, Code: st.Code().String(), CodeNum: uint32(st.Code()), Message: st.Message()}
		if err == nil {
			r.Reply = hex.EncodeToString(reply)
		}
		results = append(results, r)
	}
	line, _ := json.Marshal(map[string][]result{"calls": results})
	fmt.Println(string(line))
}
