package sql

// BellName is the named lock of key in table (lockwake.go), for the tests
// of package sql_test that wait on it.
var BellName = bellName
