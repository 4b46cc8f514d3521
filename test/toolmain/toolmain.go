// Package toolmain is the entry point the test tools share (durability,
// vblock): a subcommand per check, and an exit status a scenario can act
// on: 0 when every check passed, 1 when the run found what it checks for
// (an error it returned wraps ErrFound), 2 when the run itself failed or
// the command line was wrong.
package toolmain

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// ErrFound marks an error as a check that failed, as opposed to a run
// that failed.
var ErrFound = errors.New("check failed")

// Run runs the subcommand os.Args[1] names with the arguments after it,
// and exits.
func Run(tool string, commands map[string]func(args []string) error) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintf(os.Stderr, "usage: %s %s [flags] (-h for a command's flags)\n", tool, strings.Join(names, "|"))
		os.Exit(2)
	}
	err := commands[os.Args[1]](os.Args[2:])
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
	if errors.Is(err, ErrFound) {
		os.Exit(1)
	}
	os.Exit(2)
}
