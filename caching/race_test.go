//go:build race

package caching

// raceOn: the race detector slows replays tenfold; they shrink under it.
const raceOn = true
