//go:build !linux

package tcpopt

import (
	"net"
	"time"
)

// SetUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; the
// keep-alive still closes idle connections to a lost server.
func SetUserTimeout(*net.TCPConn, time.Duration) error { return nil }
