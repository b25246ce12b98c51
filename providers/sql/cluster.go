package sql

import (
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// clusterWarning says what is unsafe for leases in a PostgreSQL DSN that
// names several hosts, or "": without target_session_attrs=read-write (or
// primary) a connection may go to whichever host answers first, a standby
// or an old primary that came back, and agents on two primaries elect two
// leaders (docs/providers/sql.md, "Running it as a cluster"). The detail
// does not repeat the DSN: it is a secret.
func clusterWarning(driver, dsn string) string {
	if driver != "postgres" || dsn == "" {
		return ""
	}
	c, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "" // Validate reports it
	}
	hosts := map[string]bool{fmt.Sprintf("%s:%d", c.Host, c.Port): true}
	for _, f := range c.Fallbacks { // also the same host without TLS
		hosts[fmt.Sprintf("%s:%d", f.Host, f.Port)] = true
	}
	if len(hosts) < 2 {
		return ""
	}
	if v := c.ValidateConnect; v != nil {
		p := reflect.ValueOf(v).Pointer()
		if p == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer() ||
			p == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsPrimary).Pointer() {
			return ""
		}
	}
	return fmt.Sprintf("The DSN names %d hosts without target_session_attrs=read-write (or primary): each connection goes to the first host that answers, which may be a standby (every lease write then fails) or a former primary that came back after a failover, where agents would elect a second leader. Add target_session_attrs=read-write so that connections follow the primary.", len(hosts))
}
