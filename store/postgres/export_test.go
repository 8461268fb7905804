package postgres

// ReadQuery is readQuery, for the test that explains its plans.
var ReadQuery = readQuery
