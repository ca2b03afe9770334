//go:build tools

// Package seaweedfs pins SeaweedFS (Apache-2.0), built by scripts/go-tools seaweedfs: its `weed`
// program, package github.com/seaweedfs/seaweedfs/weed (see the PACKAGE file), whose S3 gateway
// is the S3-compatible server the storage sink's s3:// tests write to.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
