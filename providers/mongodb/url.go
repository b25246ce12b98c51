package mongodb

import (
	"errors"
	"net/url"
	"strings"

	"github.com/electd/electd/providers"
)

// urlForm is how a mongodb provider is written as one URL (`electd lock
// -provider URL`): the connection string itself. Its path names the
// database (default electd), as it does for the driver; the one parameter
// of electd's own, collection, is taken out of the query; w, when given,
// is the write concern.
//
//	mongodb://user:PASSWORD@db1:27017,db2:27017/electd?replicaSet=rs0&collection=leases
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"mongodb", "mongodb+srv"},
		Example: "mongodb://user:PASSWORD@host:27017/database?collection=leases",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	s := &Settings{Database: "electd", Collection: "leases", WriteConcern: "majority"}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("write mongodb://host:27017")
	}
	// Cut by hand: net/url refuses a replica set's list of hosts.
	base, query, _ := strings.Cut(rest, "?")
	if _, path, ok := strings.Cut(base, "/"); ok && path != "" {
		db, err := url.PathUnescape(path)
		if err != nil {
			return nil, errors.New("its database cannot be decoded")
		}
		s.Database = db
	}
	var kept []string
	for _, part := range strings.Split(query, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		v, err := url.QueryUnescape(v)
		if err != nil {
			return nil, errors.New("its query cannot be parsed")
		}
		switch strings.ToLower(k) {
		case "collection":
			s.Collection = v
			continue
		case "w":
			s.WriteConcern = v
		}
		kept = append(kept, part)
	}
	s.URI = raw[:len(raw)-len(rest)] + base
	if len(kept) > 0 {
		s.URI += "?" + strings.Join(kept, "&")
	}
	return s, nil
}
