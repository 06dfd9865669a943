//go:build race

package cronsim

// raceEnabled reports a build with the race detector, which makes every
// seed several times slower.
const raceEnabled = true
