// Command partita is the one binary of Partita: the standalone server, the
// simulator and benchmarks, the CLI client and the Kubernetes scheduler.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. run returns the process exit status; it writes
// results to stdout and diagnostics to stderr so tests can capture both.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the table of subcommands; `partita help` prints it.
var commands = map[string]command{}

// register adds a subcommand. Each subcommand lives in its own file and
// registers itself from init, so adding one touches no shared file.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	if _, dup := commands[name]; dup {
		panic("partita: duplicate command " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "partita: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Partita: workload-aware GPU orchestration for mixed inference and training.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: partita <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "  help       show this list")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `partita <command> -h` for a command's flags.")
}
