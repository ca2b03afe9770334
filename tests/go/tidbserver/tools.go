//go:build tools

// Package tidbserver pins TiDB's own server, built by scripts/go-tools tidbserver: the tidb module
// the other test programs use, package github.com/pingcap/tidb/tidb-server (see its PACKAGE file).
package tidbserver

import _ "github.com/pingcap/tidb/tidb-server"
