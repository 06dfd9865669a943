//go:build !race

package cronsim

const raceEnabled = false
