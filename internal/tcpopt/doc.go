// Package tcpopt sets the TCP options that make a client notice a server
// lost silently (packets dropped, no RST) in seconds: TCP_USER_TIMEOUT,
// which Go's net package does not expose.
package tcpopt
