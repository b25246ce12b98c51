package config

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// Provider types.
const (
	ProviderSQL       = "sql"
	ProviderRedis     = "redis"
	ProviderMongoDB   = "mongodb"
	ProviderAzureBlob = "azure_blob"
	ProviderDatastore = "datastore"
	ProviderEtcd      = "etcd"
)

// DefaultProvider is the provider jobs use when the configuration declares
// none: a SQLite file in the working directory, so the quickstart runs
// several agents on one machine with no server to install (SPEC §6).
func DefaultProvider() Provider {
	return Provider{Type: ProviderSQL, Name: "default", Settings: &SQLSettings{
		Driver: "sqlite",
		DSN:    "electd.db",
		Table:  "electd_leases",
	}}
}

// ProviderTypes lists the provider types, sorted.
func ProviderTypes() []string {
	return []string{ProviderAzureBlob, ProviderDatastore, ProviderEtcd, ProviderMongoDB, ProviderRedis, ProviderSQL}
}

// ProviderSpec is the hcldec spec of a provider type's body: each type
// owns its attributes.
func ProviderSpec(typ string) (hcldec.Spec, bool) {
	str := func(name string, required bool) hcldec.Spec {
		return &hcldec.AttrSpec{Name: name, Type: cty.String, Required: required}
	}
	list := func(name string, required bool) hcldec.Spec {
		return &hcldec.AttrSpec{Name: name, Type: cty.List(cty.String), Required: required}
	}
	switch typ {
	case ProviderSQL:
		return hcldec.ObjectSpec{
			"driver": str("driver", true),
			"dsn":    str("dsn", true),
			"table":  str("table", false),
		}, true
	case ProviderRedis:
		return hcldec.ObjectSpec{
			"addresses": list("addresses", true),
			"username":  str("username", false),
			"password":  str("password", false),
			"db":        &hcldec.AttrSpec{Name: "db", Type: cty.Number},
			"tls":       &hcldec.AttrSpec{Name: "tls", Type: cty.Bool},
			"prefix":    str("prefix", false),
		}, true
	case ProviderMongoDB:
		return hcldec.ObjectSpec{
			"uri":           str("uri", true),
			"database":      str("database", false),
			"collection":    str("collection", false),
			"write_concern": str("write_concern", false),
		}, true
	case ProviderAzureBlob:
		return hcldec.ObjectSpec{
			"connection_string": str("connection_string", false),
			"account_url":       str("account_url", false),
			"sas_token":         str("sas_token", false),
			"container":         str("container", false),
		}, true
	case ProviderDatastore:
		return hcldec.ObjectSpec{
			"project_id":       str("project_id", true),
			"namespace":        str("namespace", false),
			"kind":             str("kind", false),
			"credentials_file": str("credentials_file", false),
		}, true
	case ProviderEtcd:
		return hcldec.ObjectSpec{
			"endpoints":    list("endpoints", true),
			"prefix":       str("prefix", false),
			"username":     str("username", false),
			"password":     str("password", false),
			"dial_timeout": str("dial_timeout", false),
		}, true
	}
	return nil, false
}

var datastoreNamespace = regexp.MustCompile(`^[0-9A-Za-z._-]{1,100}$`)

// providerDecl is a decoded provider block with what diagnostics and
// fingerprints need.
type providerDecl struct {
	Provider
	DeclRange hcl.Range
	src       []byte
	reads     reads
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (l *loader) decodeProviders(blocks []*hcl.Block) ([]*providerDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out []*providerDecl
	seen := map[string]*providerDecl{}
	for _, b := range blocks {
		p, d := l.decodeProviderBlock(b)
		diags = append(diags, d...)
		if p == nil {
			continue
		}
		if prev, ok := seen[p.Ref()]; ok {
			diags = append(diags, errorf(hcl.RangeBetween(b.LabelRanges[0], b.LabelRanges[1]), "Duplicate provider",
				"A provider %s was already declared at %s. Each TYPE.NAME must be unique across all files.", p.Ref(), prev.DeclRange))
			continue
		}
		seen[p.Ref()] = p
		out = append(out, p)
	}
	if len(blocks) == 0 {
		out = append(out, &providerDecl{Provider: DefaultProvider(), src: []byte("embedded default provider")})
	}
	return out, diags
}

func (l *loader) decodeProviderBlock(block *hcl.Block) (*providerDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	typ, name := block.Labels[0], block.Labels[1]
	spec, ok := ProviderSpec(typ)
	if !ok {
		return nil, hcl.Diagnostics{errorf(block.LabelRanges[0], "Unknown provider type",
			"electd has no provider type %q. The provider types are %s.", typ, quoteList(ProviderTypes()))}
	}
	if !identRe.MatchString(name) {
		diags = append(diags, errorf(block.LabelRanges[1], "Invalid provider name",
			"A provider name must start with a letter or underscore and hold only letters, digits and underscores, so that jobs can refer to it as %s.NAME.", typ))
	}
	l.startReads()
	defer l.endReads()
	ctxs := l.contexts(block.DefRange.Filename)
	ctx := ctxs.static
	// No variable exists at load time; report each reference and evaluate
	// the rest with the references unknown so other problems still show.
	if vars := hcldec.Variables(block.Body, spec); len(vars) > 0 {
		ctx = ctx.NewChild()
		ctx.Variables = map[string]cty.Value{}
		for _, tr := range vars {
			diags = append(diags, errorf(tr.SourceRange(), "Variables not allowed",
				"Provider arguments are evaluated when the configuration is loaded, where no variables exist. The event object is only available in %s.", eventAttrs))
			ctx.Variables[tr.RootName()] = cty.DynamicVal
		}
	}
	val, d := hcldec.Decode(block.Body, spec, ctx)
	diags = append(diags, d...)
	content, _, _ := block.Body.PartialContent(hcldec.ImpliedSchema(spec))
	b := l.attrs(content.Attributes, block, &diags)
	rng := func(attr string) hcl.Range { return b.rangeOf(attr, block.DefRange) }

	p := &providerDecl{Provider: Provider{Type: typ, Name: name}, DeclRange: block.DefRange}
	if val.IsNull() || !val.IsKnown() {
		val = cty.UnknownVal(hcldec.ImpliedType(spec))
	}
	get := func(attr string) cty.Value {
		if !val.IsKnown() {
			return cty.DynamicVal
		}
		return val.GetAttr(attr)
	}
	str := func(attr, def string) string {
		v := get(attr)
		if v.IsNull() || !v.IsKnown() {
			return def
		}
		return v.AsString()
	}
	list := func(attr string) ([]string, bool) {
		v := get(attr)
		if v.IsNull() || !v.IsKnown() {
			return nil, false
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || !e.IsKnown() {
				diags = append(diags, errorf(rng(attr), "Invalid list element", "The elements of %s must not be null.", attr))
				return nil, false
			}
			out = append(out, e.AsString())
		}
		return out, true
	}
	// Details below never repeat a value: it may be a secret read with env().
	enum := func(attr, def string, allowed ...string) string {
		s := str(attr, def)
		for _, a := range allowed {
			if s == a {
				return s
			}
		}
		if get(attr).IsKnown() {
			diags = append(diags, errorf(rng(attr), "Invalid "+attr, "The %s must be one of %s.", attr, quoteList(allowed)))
		}
		return def
	}
	nonEmpty := func(attr, what string) {
		if v := get(attr); v.IsKnown() && !v.IsNull() && v.AsString() == "" {
			diags = append(diags, errorf(rng(attr), "Empty "+attr, "The %s must not be empty: %s.", attr, what))
		}
	}

	switch typ {
	case ProviderSQL:
		s := &SQLSettings{
			Driver: enum("driver", "sqlite", "postgres", "mysql", "sqlite"),
			DSN:    str("dsn", ""),
			Table:  str("table", "electd_leases"),
		}
		nonEmpty("dsn", "it says where the database is")
		if !identRe.MatchString(s.Table) {
			diags = append(diags, errorf(rng("table"), "Invalid table name",
				"The table must be a plain SQL identifier: a letter or underscore, then up to 62 letters, digits or underscores. It is written into SQL statements, so nothing else is accepted."))
		}
		p.Settings = s
	case ProviderRedis:
		s := &RedisSettings{
			Username: str("username", ""),
			Password: str("password", ""),
			Prefix:   str("prefix", "electd:"),
		}
		if v := get("db"); v.IsKnown() && !v.IsNull() {
			i, acc := v.AsBigFloat().Int64()
			if acc != 0 || i < 0 || i > 1<<20 {
				diags = append(diags, errorf(rng("db"), "Invalid db", "The db must be a whole, non-negative database number."))
			}
			s.DB = int(i)
		}
		if v := get("tls"); v.IsKnown() && !v.IsNull() {
			s.TLS = v.True()
		}
		addrs, known := list("addresses")
		s.Addresses = addrs
		switch n := len(addrs); {
		case !known:
		case n == 0:
			diags = append(diags, errorf(rng("addresses"), "Empty addresses",
				"Give one Redis address for a single node, or at least three for a Redlock quorum."))
		case n == 2:
			diags = append(diags, errorf(rng("addresses"), "Invalid number of addresses",
				"Redlock needs a quorum, a majority of independent Redis nodes: with 2 nodes the majority is both, so losing either one stops every election. Give 1 address for a single node, or 3 or more for Redlock."))
		case n >= 3:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Redlock is not a safe fence",
				Detail: "With several Redis nodes electd uses Redlock. Redlock's mutual exclusion depends on bounded clock drift, network delays and process pauses: after a clock jump on a Redis server or a long GC or VM pause two nodes can both believe they lead (Martin Kleppmann, \"How to do distributed locking\"). " +
					"The fencing token still grows from term to term, but only while every Redis server keeps its data (appendonly yes, appendfsync always), and it stops a deposed leader only where the resource it writes checks the token. Work that must never run twice should do that check, or use a store with a single serialising authority (etcd, SQL).",
				Subject: rng("addresses").Ptr(),
			})
		}
		p.Settings = s
	case ProviderMongoDB:
		p.Settings = &MongoDBSettings{
			URI:          str("uri", ""),
			Database:     str("database", "electd"),
			Collection:   str("collection", "leases"),
			WriteConcern: str("write_concern", "majority"),
		}
		nonEmpty("uri", "it says where the database is")
		nonEmpty("database", "leases are kept in it")
		nonEmpty("collection", "leases are kept in it")
		if n, err := strconv.Atoi(str("write_concern", "majority")); err == nil && n < 1 {
			diags = append(diags, errorf(rng("write_concern"), "Invalid write_concern",
				"The write_concern must be \"majority\", a number of members of at least 1, or the name of a custom write concern: unacknowledged writes cannot decide who leads."))
		}
	case ProviderAzureBlob:
		s := &AzureBlobSettings{
			ConnectionString: str("connection_string", ""),
			AccountURL:       str("account_url", ""),
			SASToken:         str("sas_token", ""),
			Container:        str("container", "electd-leases"),
		}
		_, hasCS := content.Attributes["connection_string"]
		_, hasURL := content.Attributes["account_url"]
		switch {
		case hasCS && hasURL:
			diags = append(diags, errorf(rng("account_url"), "Conflicting arguments",
				"Give either connection_string or account_url, not both."))
		case !hasCS && !hasURL:
			diags = append(diags, errorf(block.Body.MissingItemRange(), "Missing required argument",
				"An azure_blob provider needs connection_string, or account_url (with sas_token or the default Azure credentials)."))
		}
		nonEmpty("container", "leases are kept in it")
		p.Settings = s
	case ProviderDatastore:
		p.Settings = &DatastoreSettings{
			ProjectID:       str("project_id", ""),
			Namespace:       str("namespace", ""),
			Kind:            str("kind", "ElectdLease"),
			CredentialsFile: str("credentials_file", ""),
		}
		nonEmpty("project_id", "it names the Google Cloud project")
		nonEmpty("kind", "leases are kept as entities of this kind")
		if ns := str("namespace", ""); ns != "" && !datastoreNamespace.MatchString(ns) {
			diags = append(diags, errorf(rng("namespace"), "Invalid namespace",
				"A Datastore namespace holds up to 100 letters, digits, '.', '-' and '_'."))
		}
		if k := str("kind", "ElectdLease"); len(k) > 4 && strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__") {
			diags = append(diags, errorf(rng("kind"), "Reserved kind", "Kinds of the form __*__ are reserved by Datastore."))
		}
	case ProviderEtcd:
		s := &EtcdSettings{
			Username:    str("username", ""),
			Password:    str("password", ""),
			Prefix:      str("prefix", "/electd/"),
			DialTimeout: 5 * time.Second,
		}
		eps, known := list("endpoints")
		s.Endpoints = eps
		if known && len(eps) == 0 {
			diags = append(diags, errorf(rng("endpoints"), "Empty endpoints", "Give at least one etcd endpoint, such as \"127.0.0.1:2379\"."))
		}
		if v := get("dial_timeout"); v.IsKnown() && !v.IsNull() {
			d, err := time.ParseDuration(v.AsString())
			if err != nil || d <= 0 {
				diags = append(diags, errorf(rng("dial_timeout"), "Invalid duration",
					"The dial_timeout must be a positive Go duration string such as \"5s\"."))
			} else {
				s.DialTimeout = d
			}
		}
		p.Settings = s
	}
	p.src = l.blockSource(block)
	p.reads = l.cur
	return p, diags
}
