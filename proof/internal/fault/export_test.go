package fault

// DialLink connects to a coordinator as child number child would, for tests
// that play a child's part in the test process.
var DialLink = dialLink
