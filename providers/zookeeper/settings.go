package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "zookeeper"` block.
type Settings struct {
	Servers []string // host:port of every server of the ensemble
	Root    string   // DefaultRoot when empty; created when missing
	// Username and Password are ZooKeeper digest credentials. With them the
	// provider authenticates every session and creates its znodes readable
	// and writable by that user only.
	Username string
	Password string // secret
	// ConnectTimeout bounds how long an operation waits for a session to be
	// established (a first connection, or a new session after one expired).
	ConnectTimeout time.Duration
}

var _ providers.Settings = (*Settings)(nil)

// DefaultRoot is the znode under which leases live when the settings give
// no root.
const DefaultRoot = "/electd"

// DefaultConnectTimeout bounds the wait for a session when the block sets
// none.
const DefaultConnectTimeout = 10 * time.Second

// maxField bounds keys and holders: they are znode names and data, and
// travel in every request.
const maxField = 255

// Session timeouts are whole milliseconds and ZooKeeper negotiates them
// within the server's bounds (2 to 20 ticks by default: 4 s to 40 s); the
// static limits can only say what no server accepts, and the run-time check
// of a negotiated timeout does the rest (see session.go).
//
// A key is one znode name under the root.
var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Second,
	Key: func(key string) error {
		switch {
		case strings.Contains(key, "/"):
			return errors.New("key must not contain \"/\"")
		case key == "." || key == "..":
			return errors.New("key must not be \".\" or \"..\"")
		case badRune(key):
			return errors.New("key holds a character ZooKeeper refuses in znode names")
		}
		return nil
	}}

// Type is the zookeeper provider type of the configuration language.
func Type() providers.Type {
	str := func(name string) hcldec.Spec { return providers.StringAttr(name, false) }
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"servers":         providers.ListAttr("servers", true),
			"root":            str("root"),
			"username":        str("username"),
			"password":        str("password"),
			"connect_timeout": str("connect_timeout"),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				Servers:        b.List("servers"),
				Root:           b.String("root", DefaultRoot),
				Username:       b.String("username", ""),
				Password:       b.String("password", ""),
				ConnectTimeout: b.Duration("connect_timeout", DefaultConnectTimeout),
			}
			if distinctCount(s.Servers) == 2 {
				b.Warnf("servers", "Two servers: no fault tolerance", twoServers)
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys, holders and ttls.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the password.
func (s *Settings) Secrets() []string { return []string{s.Password} }

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the servers, the root path and the credentials.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	if len(s.Servers) == 0 {
		errs = append(errs, providers.Fieldf("servers", "Empty servers", "Give at least one ZooKeeper server, such as \"127.0.0.1:2181\"."))
	}
	// One diagnostic for the list (a second on the same attribute would not
	// be shown), naming every bad server by its place.
	var bad []string
	for i, srv := range s.Servers {
		if msg := checkServer(srv); msg != "" {
			bad = append(bad, fmt.Sprintf("server %d %s", i+1, msg))
		}
	}
	if len(bad) > 0 {
		errs = append(errs, providers.Fieldf("servers", "Invalid server",
			"In the list, %s. Write host:port, such as \"127.0.0.1:2181\" (no scheme, and no chroot path: set root instead).", strings.Join(bad, "; ")))
	}
	if msg := checkRoot(s.Root); msg != "" {
		errs = append(errs, providers.Fieldf("root", "Invalid root", "The root %s. Write an absolute znode path such as \"/electd\" or \"/services/electd\".", msg))
	}
	switch {
	case s.Username == "" && s.Password != "":
		errs = append(errs, providers.Fieldf("password", "Password without username", "A digest password is sent with a username; set username too."))
	case s.Username != "" && s.Password == "":
		// On password, not username: a password from env() that `check
		// -no-env` cannot know is not missing.
		errs = append(errs, providers.Fieldf("password", "Username without password", "ZooKeeper digest authentication needs a password with the username; set password too."))
	case strings.Contains(s.Username, ":"):
		errs = append(errs, providers.Fieldf("username", "Invalid username", "A digest username cannot hold \":\", which separates it from the password."))
	}
	if s.ConnectTimeout < 0 {
		errs = append(errs, providers.Fieldf("connect_timeout", "Invalid duration", "The connect_timeout must be positive."))
	}
	return providers.Invalid(errs...)
}

// checkServer says what is wrong with a server address, or "".
func checkServer(srv string) string {
	if strings.Contains(srv, "://") {
		return "has a scheme"
	}
	if strings.Contains(srv, "/") {
		return "has a path"
	}
	host, port, err := net.SplitHostPort(srv)
	if err != nil || host == "" {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no valid port (1 to 65535)"
	}
	return ""
}

// checkRoot says what is wrong with a root path, or "": ZooKeeper's own
// rules for a path (PathUtils.validatePath), and not / itself (the leases
// would sit beside /zookeeper) nor under /zookeeper (the server's own).
func checkRoot(root string) string {
	switch {
	case root == "":
		return "is empty"
	case !strings.HasPrefix(root, "/"):
		return "does not start with \"/\""
	case root == "/":
		return "is \"/\" itself: the leases need a znode of their own"
	case strings.HasSuffix(root, "/"):
		return "ends with \"/\""
	case strings.Contains(root, "//"):
		return "holds an empty name (\"//\")"
	case root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/"):
		return "is under /zookeeper, which the server keeps for itself"
	}
	for _, name := range strings.Split(root[1:], "/") {
		if name == "." || name == ".." {
			return "holds a relative name (\".\" or \"..\")"
		}
	}
	if badRune(root) {
		return "holds a control character or a character ZooKeeper refuses in paths"
	}
	return ""
}

// badRune reports whether s holds a character ZooKeeper refuses in a path:
// U+0000 to U+001F, U+007F to U+009F, U+D800 to U+F8FF, U+FFF0 to U+FFFF.
func badRune(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) || r == unicode.ReplacementChar
	}) >= 0
}
