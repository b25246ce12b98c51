package datastore

import (
	"context"
	"errors"
	"os"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "datastore"` block.
type Settings struct {
	ProjectID       string
	Namespace       string // "" = the default namespace
	Kind            string // DefaultKind in a configuration
	CredentialsFile string // "" = the application default credentials
}

var _ providers.Settings = (*Settings)(nil)

// maxField is the longest key name and holder: Datastore indexes strings up
// to 1500 bytes.
const maxField = 1500

// A key is an entity's name: UTF-8, and not a name Datastore reserves. A
// holder is a string property: UTF-8.
var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond,
	Key: func(key string) error { return checkName("key", key) },
	Holder: func(holder string) error {
		if !utf8.ValidString(holder) {
			return errors.New("holder is not valid UTF-8")
		}
		return nil
	}}

// Type is the datastore provider type of the configuration language.
func Type() providers.Type {
	str := providers.StringAttr
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"project_id":       str("project_id", true),
			"namespace":        str("namespace", false),
			"kind":             str("kind", false),
			"credentials_file": str("credentials_file", false),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				ProjectID:       b.String("project_id", ""),
				Namespace:       b.String("namespace", ""),
				Kind:            b.String("kind", DefaultKind),
				CredentialsFile: b.String("credentials_file", ""),
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys and holders.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are none: the credentials stay in credentials_file, whose path is
// not secret, and only Google's client reads it.
func (s *Settings) Secrets() []string { return nil }

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the names and reads the credentials file (unless
// DATASTORE_EMULATOR_HOST points at an emulator, which ignores it).
func (s *Settings) Validate() error { return s.validate(os.Getenv(EmulatorHostEnv)) }

func (s *Settings) validate(emulatorHost string) error {
	var errs []*providers.FieldError
	if s.ProjectID == "" {
		errs = append(errs, providers.Fieldf("project_id", "Empty project_id", "The project_id must not be empty: it names the Google Cloud project."))
	}
	if s.Kind != "" {
		if err := checkName("kind", s.Kind); err != nil {
			errs = append(errs, providers.Fieldf("kind", "Invalid kind", "A Datastore kind is 1 to %d bytes of UTF-8, and names of the form __*__ are reserved by Datastore.", maxField))
		}
	}
	if s.Namespace != "" && !namespaceRE.MatchString(s.Namespace) {
		errs = append(errs, providers.Fieldf("namespace", "Invalid namespace", "A Datastore namespace holds up to 100 letters, digits, '.', '-' and '_'."))
	}
	if s.CredentialsFile != "" && emulatorHost == "" {
		if _, err := credentialsOption(s.CredentialsFile); err != nil {
			errs = append(errs, providers.Fieldf("credentials_file", "Invalid credentials_file", "The credentials_file cannot be used: %s.", err))
		}
	}
	return providers.Invalid(errs...)
}
