package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = "usage: gpumem version [--json]\n"

// buildVersion describes the running binary, from its build information.
type buildVersion struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // module version: v1.2.3, or (devel) from a source tree
	Revision string `json:"revision,omitempty"` // VCS revision, when built in a checkout
	Time     string `json:"time,omitempty"`     // VCS commit time
	Modified bool   `json:"modified,omitempty"` // the checkout had local changes
	Go       string `json:"go"`
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// currentVersion reads the build information; a binary built without it
// (or from a source tree without VCS information) still says what it can.
func currentVersion() buildVersion {
	v := buildVersion{Module: "github.com/gpumem/gpumem", Version: "(devel)", Go: runtime.Version()}
	bi, ok := readBuildInfo()
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: "gpumem v1.2.3 (rev abc123, 2025-01-02T…, modified) go1.24".
func (v buildVersion) String() string {
	s := "gpumem " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (rev " + rev
		if v.Time != "" {
			s += ", " + v.Time
		}
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	} else {
		s += " (no VCS information)"
	}
	return s + " " + v.Go + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object: module, version, revision, time, modified, go")
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return fail(stderr, versionUsage, usagef("version takes no arguments (got %q)", pos))
	}
	v := currentVersion()
	if *asJSON {
		printJSON(stdout, v)
		return exitOK
	}
	fmt.Fprintln(stdout, v)
	return exitOK
}
