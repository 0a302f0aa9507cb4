// Package layout has no code of its own: its tests hold the module to
// the import rules of the design (who may import whom, see
// docs/development.md), reading the import graph with go list, so that a
// wrong arrow fails `go test ./...` with the importer, the imported and
// the rule it breaks.
package layout
