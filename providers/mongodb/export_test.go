package mongodb

import (
	"context"
	"time"

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

// WriteEntry writes the log entry of key at slot for holder's term token,
// as a renewal whose request was delayed would, and reports whether the
// provider takes it as written (confirmed).
func (p *Provider) WriteEntry(ctx context.Context, key string, slot int64, holder string, token uint64) error {
	tb, err := p.timeBase(ctx)
	if err != nil {
		return err
	}
	_, err = p.append(ctx, tb, entry{key: key, slot: slot, token: int64(token), holder: holder, ttl: time.Minute})
	return err
}

// ErrSlotTaken is what WriteEntry returns for a write not confirmed.
var ErrSlotTaken = errSlotTaken

// CleanEvery is how often a write deletes old entries.
const CleanEvery = cleanEvery
