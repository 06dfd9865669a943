package lock

// The names this package had before a DB was spelled as Go spells it. They
// stay for one release, so that code written against them still builds;
// staticcheck and gopls point at each use.

// Db is the former name of [DB].
//
// Deprecated: use DB.
type Db = DB //lint:ignore ST1003 the former name, kept for one release

// ReadOnlyDb is the former name of [ReadOnlyDB].
//
// Deprecated: use ReadOnlyDB.
type ReadOnlyDb = ReadOnlyDB //lint:ignore ST1003 the former name, kept for one release

// DbOption is the former name of [DBOption].
//
// Deprecated: use DBOption.
type DbOption = DBOption //lint:ignore ST1003 the former name, kept for one release

// NewDb is the former name of [NewDB].
//
// Deprecated: use NewDB.
//
//lint:ignore ST1003 the former name, kept for one release
func NewDb(c Client, opts ...DBOption) DB { return NewDB(c, opts...) }

// NewReadOnlyDb is the former name of [NewReadOnlyDB].
//
// Deprecated: use NewReadOnlyDB.
//
//lint:ignore ST1003 the former name, kept for one release
func NewReadOnlyDb(c Client) ReadOnlyDB { return NewReadOnlyDB(c) }
