package config

import (
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
		{Name: "tags"},
		{Name: "balance"},
	},
}

// agentDecl is the decoded agent block with the ranges later rules point at.
type agentDecl struct {
	Agent
	nodeIDRange   hcl.Range // node_id, or the block; empty without a block
	shutdownRange hcl.Range // shutdown_timeout, or the block
	shutdownOK    bool      // shutdown_timeout was given validly or defaulted
}

// decodeAgents decodes the agent block; there is at most one across all
// files. Without one, every setting takes its default.
func (l *loader) decodeAgents(blocks []*hcl.Block) (*agentDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, b := range blocks[min(1, len(blocks)):] {
		diags = append(diags, errorf(b.DefRange, "Duplicate agent block",
			"An agent block was already declared at %s. Only one agent block is allowed across all files.", blocks[0].DefRange))
	}
	if len(blocks) == 0 {
		return &agentDecl{Agent: Agent{
			NodeID:          defaultNodeID(),
			Listen:          DefaultListen,
			LogLevel:        "info",
			LogFormat:       "text",
			ShutdownTimeout: DefaultShutdownTimeout,
			Balance:         true,
		}, shutdownOK: true}, diags
	}
	a, d := l.decodeAgentBlock(blocks[0])
	return a, append(diags, d...)
}

func (l *loader) decodeAgentBlock(block *hcl.Block) (*agentDecl, hcl.Diagnostics) {
	content, diags := block.Body.Content(agentSchema)
	b := l.attrs(content.Attributes, block, &diags)
	a := &agentDecl{Agent: Agent{
		NodeID:    b.line("node_id", ""),
		Listen:    b.line("listen", DefaultListen),
		APIToken:  b.line("api_token", ""),
		LogLevel:  b.enum("log_level", "info", "trace", "debug", "info", "warn", "error"),
		LogFormat: b.enum("log_format", "text", "text", "json"),
		Tags:      b.tags("tags"),
		Balance:   b.boolean("balance", true),
	}}
	if _, ok := a.Tags[TagNode]; ok {
		diags = append(diags, errorf(b.rangeOf("tags", block.DefRange), "Reserved tag",
			"The tag %q is always this node's node_id; set node_id instead.", TagNode))
		delete(a.Tags, TagNode)
	}
	l.secret(a.APIToken)
	a.nodeIDRange = b.rangeOf("node_id", block.DefRange)
	a.shutdownRange = b.rangeOf("shutdown_timeout", block.DefRange)
	a.ShutdownTimeout, a.shutdownOK = b.duration("shutdown_timeout", DefaultShutdownTimeout)
	if a.shutdownOK && a.ShutdownTimeout == 0 {
		diags = append(diags, errorf(a.shutdownRange, "Invalid shutdown_timeout",
			"The shutdown_timeout must be longer than zero: it is the time children get to stop and leases to be released when the agent stops."))
		a.shutdownOK = false
	}
	if a.NodeID == "" {
		a.NodeID = defaultNodeID()
	}
	tokenKnown := b.known("api_token")
	if a.Listen != "" {
		host, _, err := net.SplitHostPort(a.Listen)
		switch {
		case err != nil:
			diags = append(diags, errorf(b.rangeOf("listen", block.DefRange), "Invalid listen address",
				"The listen address must be host:port, such as \"127.0.0.1:8790\", or \"\" to turn the HTTP API off."))
		case !isLoopback(host) && a.APIToken == "" && (tokenKnown || !b.has("api_token")):
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

// defaultNodeID is the host name: a node's name, stable across restarts,
// the same file serving every node. Two processes on one host are still
// told apart: the agent adds its process's incarnation to the lease holder.
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "electd"
	}
	return host
}
