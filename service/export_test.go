package service

// Collect is collect, for the tests of package service_test.
var Collect = collect
