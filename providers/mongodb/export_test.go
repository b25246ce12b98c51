package mongodb

import (
	"context"

	"github.com/hashicorp/go-hclog"
)

// NewClientClock is New with the probe skipped: the fallback path, which
// judges expiry by this host's clock, on any server.
func NewClientClock(s Settings, log hclog.Logger) (*Provider, error) {
	p, err := newProvider(s, log)
	if err != nil {
		return nil, err
	}
	p.forceClient = true
	return p, nil
}

// ServerClock reports whether the provider judges expiry by the server's
// clock, probing the server if it has not yet.
func (p *Provider) ServerClock(ctx context.Context) (bool, error) {
	tb, err := p.timeBase(ctx)
	if err != nil {
		return false, err
	}
	return tb.serverClock(), nil
}

// WriteConcernW is what the write_concern setting s parses to.
func WriteConcernW(s string) (any, error) {
	wc, err := writeConcern(s)
	if err != nil {
		return nil, err
	}
	return wc.W, nil
}
