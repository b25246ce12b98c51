package datastore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/datastore"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/electd/electd/providers"
)

// DefaultKind is the entity kind used when the settings leave Kind empty.
const DefaultKind = "ElectdLease"

// ClockSkew is how far a candidate's wall clock may run ahead of the
// holder's before a lease can be taken while the holder still believes it
// leads, beyond the 1% of ttl the agent keeps for itself. A candidate treats
// a lease as expired only ClockSkew after the expiry the holder wrote.
const ClockSkew = time.Second

// EmulatorHostEnv names the variable that points the client library, and
// this provider, at a Datastore emulator instead of Google Cloud.
const EmulatorHostEnv = "DATASTORE_EMULATOR_HOST"

// txAttempts bounds the runs of one transaction: Datastore aborts all but one
// of the transactions that race on an entity, and the losers run again to
// read the winner.
const txAttempts = 8

// reserved matches the names Datastore keeps for itself (__kind__ and so on).
var reserved = regexp.MustCompile(`^__.*__$`)

var _ providers.Provider = (*Provider)(nil)

// Provider is a lease store on one kind in one namespace of a Datastore
// database (Firestore in Datastore mode).
type Provider struct {
	client    *datastore.Client
	kind      string
	namespace string
	log       hclog.Logger
	// now is the wall clock expiries are written and judged with; tests
	// replace it to play a node whose clock is off.
	now func() time.Time
	// legacyGroups is set once the store refused a transaction over more
	// than 25 entity groups: batches use transactions of 25 from then on.
	legacyGroups atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// New opens a client on the database of s.ProjectID. When
// DATASTORE_EMULATOR_HOST is set it talks to that emulator, without
// credentials, as the client library does; otherwise it authenticates with
// s.CredentialsFile or the application default credentials. It sends no
// Datastore request: an agent started while the store is unreachable keeps
// running and reports errors per operation.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	return newProvider(ctx, s, log, os.Getenv(EmulatorHostEnv))
}

func newProvider(ctx context.Context, s Settings, log hclog.Logger, emulatorHost string) (*Provider, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if s.Kind == "" {
		s.Kind = DefaultKind
	}
	if err := s.validate(emulatorHost); err != nil {
		return nil, fmt.Errorf("datastore: %w", err)
	}
	kind := s.Kind
	log = log.Named("datastore").With("project", s.ProjectID, "namespace", s.Namespace, "kind", kind)

	opts := []option.ClientOption{option.WithGRPCDialOption(grpc.WithDefaultServiceConfig(serviceConfig))}
	switch {
	case emulatorHost != "":
		if s.CredentialsFile != "" {
			log.Warn("credentials_file is ignored: " + EmulatorHostEnv + " points at an emulator")
		}
		log.Info("using the Datastore emulator", "host", emulatorHost)
		opts = append(opts, emulatorOptions(emulatorHost)...)
	case s.CredentialsFile != "":
		o, err := credentialsOption(s.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("datastore: credentials_file: %w", err)
		}
		opts = append(opts, o)
	}
	client, err := datastore.NewClient(ctx, s.ProjectID, opts...)
	if err != nil {
		return nil, fmt.Errorf("datastore: new client for project %q: %w", s.ProjectID, err)
	}
	return &Provider{
		client:    client,
		kind:      kind,
		namespace: s.Namespace,
		log:       log,
		now:       time.Now,
	}, nil
}

// serviceConfig is the client library's retry policy for the Datastore
// service without its waitForReady: with it, a call to a store that cannot
// be reached waits out its whole deadline and fails as "deadline exceeded";
// without it, the call fails within a second, after the same retries, with
// the cause (connection refused, DNS), and the agent retries on its own
// schedule while its term lasts.
const serviceConfig = `{
  "methodConfig": [{
    "name": [{"service": "google.datastore.v1.Datastore"}],
    "timeout": "60s",
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.100s",
      "maxBackoff": "60s",
      "backoffMultiplier": 1.3,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }, {
    "name": [{"service": "google.datastore.v1.Datastore", "method": "Lookup"}],
    "timeout": "60s",
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.100s",
      "maxBackoff": "60s",
      "backoffMultiplier": 1.3,
      "retryableStatusCodes": ["UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED"]
    }
  }]
}`

var namespaceRE = regexp.MustCompile(`^[0-9A-Za-z._-]{1,100}$`)

// emulatorOptions dial host in plain text without credentials, as
// datastore.NewClient does for DATASTORE_EMULATOR_HOST; passing them
// explicitly lets a caller aim at another host than the environment's.
func emulatorOptions(host string) []option.ClientOption {
	host = strings.TrimPrefix(strings.TrimPrefix(host, "http://"), "https://")
	return []option.ClientOption{
		option.WithEndpoint("passthrough:///" + host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// credentialsOption loads a credentials file of the types Google issues for
// servers and people. The type is read from the file and named to the auth
// library, which refuses a file of another type than it was told.
func credentialsOption(path string) (option.ClientOption, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not a JSON credentials file: %w", path, err)
	}
	switch t := option.CredentialsType(f.Type); t {
	case option.ServiceAccount, option.AuthorizedUser, option.ExternalAccount, option.ImpersonatedServiceAccount:
		return option.WithAuthCredentialsFile(t, path), nil
	default:
		return nil, fmt.Errorf("%s has credentials of type %q; want service_account, authorized_user, external_account or impersonated_service_account", path, f.Type)
	}
}

func checkName(what, name string) error {
	switch {
	case name == "" || len(name) > maxField:
		return fmt.Errorf("%s must be 1 to %d bytes", what, maxField)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case reserved.MatchString(name):
		return fmt.Errorf("%s %q: names of the form __*__ are reserved by Datastore", what, name)
	}
	return nil
}

// Close closes the client. It is safe to call more than once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.client.Close() })
	return p.closeErr
}
