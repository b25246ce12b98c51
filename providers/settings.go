package providers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
)

// Type is one kind of lease store as the configuration language sees it.
// The store's package owns it: the schema of a `provider "TYPE" "NAME"`
// block, the rules on its values, and how to open the store. The registry
// (package providers/registry) maps type names to Types; nothing else names
// a store.
type Type struct {
	// Spec is the hcldec spec of the block's body.
	Spec hcldec.Spec
	// Decode turns a block decoded by Spec into settings, adding a
	// diagnostic to b for a value of the wrong form. The loader then runs
	// the settings' Validate, the one the store's constructor runs, so a
	// block that loads cleanly is one the store opens (short of connecting).
	Decode func(b *Block) Settings
	// URL, when set, reads the store's settings from one URL, for the
	// commands that take no configuration file (`electd lock -provider
	// URL`). Nil for a store without a natural URL form.
	URL *URLForm
}

// Settings are a provider block's values, typed by the store's package.
type Settings interface {
	// Validate checks every rule that needs no store: names, formats, DSN
	// and URI parsing. Its errors are *FieldError, joined.
	Validate() error
	// Limits are what the store accepts of the jobs that use it.
	Limits() Limits
	// Open returns a client on the store. It runs Validate first.
	Open(ctx context.Context, log hclog.Logger) (Provider, error)
	// Secrets are the values that must never be shown: each secret
	// attribute whole, and the secret parts inside it (the password of a
	// DSN, the signature of a SAS token), because a driver's error may
	// quote a part without the whole, or the whole re-encoded. The agent
	// masks them in its logs, API answers and command output (package
	// internal/redact). Only the store's package knows where its secrets
	// hide, so each declares its own.
	Secrets() []string
}

// ReadOnlyOpener is Settings that can open the store only to observe it
// (electd leases): the client creates nothing, neither a table nor a
// database file, and says so when there is nothing where the settings
// point.
type ReadOnlyOpener interface {
	OpenReadOnly(ctx context.Context, log hclog.Logger) (Provider, error)
}

// FieldError is a problem with one attribute of a provider block. Detail is
// a whole sentence that never repeats the value: it may be a secret.
type FieldError struct {
	Attr    string
	Summary string
	Detail  string
}

func (e *FieldError) Error() string { return e.Attr + ": " + e.Detail }

// Fieldf returns a *FieldError.
func Fieldf(attr, summary, detail string, args ...any) *FieldError {
	return &FieldError{Attr: attr, Summary: summary, Detail: fmt.Sprintf(detail, args...)}
}

// Limits are the bounds a store puts on the jobs that use it. They are
// declared once per store: its lease operations check them at run time
// (Check, CheckRenew, CheckHeld) and `electd check` applies the lengths and
// the ttl to each job's name, the node_id and the ttl.
type Limits struct {
	MaxKey    int           // bytes of a lease key (the job name)
	MaxHolder int           // bytes of a holder (the node_id)
	MinTTL    time.Duration // the store's floor
	MaxTTL    time.Duration // 0: no ceiling
	TTLStep   time.Duration // the ttl must be a multiple of it; 0: any
	// Key and Holder, when set, are the store's own rules on the text of a
	// key or a holder (characters it refuses, reserved names), checked
	// after the length.
	Key, Holder func(string) error
	// Failover, for a store configured as a cluster, is how long it may
	// take with its default settings to replace a lost leader of its own,
	// during which no renewal succeeds; FailoverWhy says so in a sentence.
	// Zero for a single server, or where the store's settings are not
	// known here. `electd check` warns for a job whose renewal window is
	// shorter (config).
	Failover    time.Duration
	FailoverWhy string
}

// Check checks one lease request (an Acquire) against the limits: its ttl,
// key and holder.
func (l Limits) Check(key, holder string, ttl time.Duration) error {
	if err := l.CheckTTL(ttl); err != nil {
		return err
	}
	if err := l.CheckKey(key); err != nil {
		return err
	}
	return l.CheckHolder(holder)
}

// CheckRenew checks a lease given to Renew: its ttl, key and holder as
// Check does, and its Value.
func (l Limits) CheckRenew(lease Lease) error {
	if err := l.Check(lease.Key, lease.Holder, lease.TTL); err != nil {
		return err
	}
	return CheckValue(lease.Value)
}

// CheckHeld checks a lease the caller holds whatever its ttl (a Release):
// its key, holder and Value.
func (l Limits) CheckHeld(lease Lease) error {
	if err := l.CheckKey(lease.Key); err != nil {
		return err
	}
	if err := l.CheckHolder(lease.Holder); err != nil {
		return err
	}
	return CheckValue(lease.Value)
}

// CheckKey checks a lease key: its length, then the store's Key rule.
func (l Limits) CheckKey(key string) error {
	if key == "" || len(key) > l.MaxKey {
		return fmt.Errorf("key must be 1 to %d bytes", l.MaxKey)
	}
	if l.Key != nil {
		return l.Key(key)
	}
	return nil
}

// CheckHolder checks a holder: its length, then the store's Holder rule.
func (l Limits) CheckHolder(holder string) error {
	if holder == "" || len(holder) > l.MaxHolder {
		return fmt.Errorf("holder must be 1 to %d bytes", l.MaxHolder)
	}
	if l.Holder != nil {
		return l.Holder(holder)
	}
	return nil
}

// CheckTTL checks a ttl against the store's floor, ceiling and step.
func (l Limits) CheckTTL(ttl time.Duration) error {
	switch {
	case ttl < l.MinTTL || ttl <= 0:
		return fmt.Errorf("ttl %s is shorter than %s", ttl, max(l.MinTTL, time.Nanosecond))
	case l.MaxTTL > 0 && ttl > l.MaxTTL:
		return fmt.Errorf("ttl %s is longer than %s", ttl, l.MaxTTL)
	case l.TTLStep > 0 && ttl%l.TTLStep != 0:
		return fmt.Errorf("ttl %s is not a whole multiple of %s", ttl, l.TTLStep)
	}
	return nil
}

// ErrInvalidSettings marks an error of Settings.Validate.
var ErrInvalidSettings = errors.New("providers: invalid settings")

// Invalid joins field errors into one error that is ErrInvalidSettings, or
// returns nil when there are none.
func Invalid(errs ...*FieldError) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &invalidError{errors.Join(out...)}
}

type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() []error { return []error{ErrInvalidSettings, e.err} }

// FieldErrors lists the field errors inside err.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
