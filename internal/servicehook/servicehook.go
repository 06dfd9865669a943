// Package servicehook gives the root package's ServiceBuilder what package
// service keeps unexported: a registry that holds the jobs the builder
// built, where two jobs of one type are fine. Package service sets the hook
// when it is initialized, so it is set before any code that imports service
// runs.
package servicehook

// Collect returns a *service.Services of values, like service.New, but never
// fails: a nil value is left out, and a type that two values share is held
// as ambiguous, so that looking it up returns service.ErrAmbiguous. It is
// typed any because this package can't import service, which imports it.
var Collect func(values ...any) any
