package cron

// OwnerOf is owner, for the tests of package cron_test: which of the
// sorted replicas owns a Cron slot of the job whose lease is name.
var OwnerOf = owner
