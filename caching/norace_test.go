//go:build !race

package caching

const raceOn = false
