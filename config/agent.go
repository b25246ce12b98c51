package config

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// DefaultListen is the HTTP API address when the agent block does not say.
const DefaultListen = "127.0.0.1:8790"

var agentSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "node_id"},
		{Name: "listen"},
		{Name: "api_token"},
		{Name: "log_level"},
		{Name: "log_format"},
		{Name: "shutdown_timeout"},
	},
}

// decodeAgents decodes the agent block; there is at most one across all
// files. Without one, every setting takes its default.
func (l *loader) decodeAgents(blocks []*hcl.Block) (Agent, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, b := range blocks[min(1, len(blocks)):] {
		diags = append(diags, errorf(b.DefRange, "Duplicate agent block",
			"An agent block was already declared at %s. Only one agent block is allowed across all files.", blocks[0].DefRange))
	}
	if len(blocks) == 0 {
		return Agent{
			NodeID:          defaultNodeID(),
			Listen:          DefaultListen,
			LogLevel:        "info",
			LogFormat:       "text",
			ShutdownTimeout: DefaultShutdownTimeout,
		}, diags
	}
	a, d := l.decodeAgentBlock(blocks[0])
	return *a, append(diags, d...)
}

func (l *loader) decodeAgentBlock(block *hcl.Block) (*Agent, hcl.Diagnostics) {
	content, diags := block.Body.Content(agentSchema)
	b := l.attrs(content.Attributes, block, &diags)
	a := &Agent{
		NodeID:    b.str("node_id", ""),
		Listen:    b.str("listen", DefaultListen),
		APIToken:  b.str("api_token", ""),
		LogLevel:  b.enum("log_level", "info", "trace", "debug", "info", "warn", "error"),
		LogFormat: b.enum("log_format", "text", "text", "json"),
	}
	a.ShutdownTimeout, _ = b.duration("shutdown_timeout", DefaultShutdownTimeout)
	if a.NodeID == "" {
		a.NodeID = defaultNodeID()
	}
	if a.Listen != "" {
		host, _, err := net.SplitHostPort(a.Listen)
		switch {
		case err != nil:
			diags = append(diags, errorf(b.rangeOf("listen", block.DefRange), "Invalid listen address",
				"The listen address must be host:port, such as \"127.0.0.1:8790\", or \"\" to turn the HTTP API off."))
		case !isLoopback(host) && a.APIToken == "":
			diags = append(diags, errorf(b.rangeOf("listen", block.DefRange), "Missing api_token",
				"The HTTP API listens on a non-loopback address, so anyone who can reach it could make the agent step down. Set api_token (for example api_token = env(\"ELECTD_API_TOKEN\")), or listen on 127.0.0.1."))
		}
	}
	return a, diags
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultNodeID is <hostname>-<pid>-<4 random hex>: unique per process even
// when several agents share a machine (the quickstart does).
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "electd"
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
