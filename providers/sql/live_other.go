//go:build !linux

package sql

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; the
// keep-alive still closes idle connections to a lost server.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
