package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// ctlVerb is one ctl command: its positional arguments, its flags (with
// help, for -h) and the request it makes of them.
type ctlVerb struct {
	name  string // "add namespace"
	args  []string
	about string
	// flags declares the flags on fs and returns what turns the
	// positional arguments into the command, once fs is parsed.
	flags func(fs *flag.FlagSet) func(pos []string) (*Command, error)
}

// ctlHelp is the answer to COMMAND -h.
type ctlHelp struct{ text string }

func (h *ctlHelp) Error() string { return h.text }

// Parse turns a ctl command line (after the global flags) into a
// command, or a usage error, or *ctlHelp.
func Parse(args []string) (*Command, error) {
	if len(args) == 0 {
		return nil, errors.New(usage())
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return nil, flag.ErrHelp
	case "add", "set", "remove", "gateway":
		if len(rest) == 0 || rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help" {
			return nil, fmt.Errorf("%s what?\n%s", name, usage())
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	for _, v := range verbs {
		if v.name == name {
			return v.parse(rest)
		}
	}
	return nil, fmt.Errorf("unknown command %q\n%s", name, usage())
}

func (v *ctlVerb) parse(args []string) (*Command, error) {
	fs := flag.NewFlagSet("nvmeof-tgt ctl "+v.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	finish := v.flags(fs)
	pos, err := positional(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, &ctlHelp{v.help(fs)}
	case err != nil:
		return nil, fmt.Errorf("%v\n%s", err, v.help(fs))
	case len(pos) != len(v.args):
		return nil, fmt.Errorf("%s takes %d arguments, got %d\n%s", v.name, len(v.args), len(pos), v.help(fs))
	}
	if err := missingFlags(v.name, fs); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, v.help(fs))
	}
	return finish(pos)
}

// missingFlags reports, as a usage error, a flag marked (required) that
// was not given, or a set command given nothing to set.
func missingFlags(name string, fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Usage, "(required)") && !given[f.Name] {
			missing = append(missing, "-"+f.Name)
		}
	})
	switch {
	case len(missing) > 0:
		return fmt.Errorf("%s needs %s", name, strings.Join(missing, " and "))
	case strings.HasPrefix(name, "set ") && len(given) == 0 && hasFlags(fs):
		return fmt.Errorf("%s: nothing to set", name)
	}
	return nil
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// usage is ctl's usage: every command of the verbs table, its arguments,
// its flags and the first line of what it does, made from the table so
// that it cannot leave one out.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: nvmeof-tgt ctl [-socket PATH] COMMAND [ARGS] [FLAGS]\n")
	for _, v := range verbs {
		line := "  " + strings.Join(append([]string{v.name}, v.args...), " ")
		about, _, _ := strings.Cut(v.about, "\n")
		fmt.Fprintf(&b, "%-40s %s\n", line, about)
		fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
		v.flags(fs)
		writeWrapped(&b, "      ", flagSummary(fs), 100)
	}
	b.WriteString(`Changes apply at once and last until the daemon stops or reloads its
file; save them to keep them. COMMAND -h describes each flag.
The socket is -socket PATH or -socket=PATH, else $NVMEOF_TGT_SOCKET, else
` + config.DefaultControlSocket + `.`)
	return b.String()
}

// flagSummary is each flag of fs as [-name VALUE], VALUE the name its
// help quotes; a required flag has no brackets.
func flagSummary(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		s := "-" + f.Name
		if name != "" {
			s += " " + name
		}
		if !strings.Contains(help, "(required)") {
			s = "[" + s + "]"
		}
		if strings.Contains(help, "(repeat for more)") {
			s += "..."
		}
		out = append(out, s)
	})
	return out
}

// writeWrapped writes words after indent, in lines of at most width.
func writeWrapped(b *strings.Builder, indent string, words []string, width int) {
	line := ""
	for _, w := range words {
		if line != "" && len(indent)+len(line)+1+len(w) > width {
			b.WriteString(indent + line + "\n")
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		b.WriteString(indent + line + "\n")
	}
}

// help is the usage line, what the command does, and each flag with its help.
func (v *ctlVerb) help(fs *flag.FlagSet) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "usage: nvmeof-tgt ctl %s", v.name)
	for _, a := range v.args {
		b.WriteString(" " + a)
	}
	fmt.Fprintf(&b, " [flags]\n%s\n", v.about)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		b.WriteString("flags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return strings.TrimRight(b.String(), "\n")
}

// positional parses flags that may come before or after the positional
// arguments, and returns those.
func positional(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// uintVar declares an unsigned flag that refuses values T cannot hold.
func uintVar[T uint16 | uint32](fs *flag.FlagSet, p *T, name string, def T, usage string) {
	*p = def
	if def != 0 {
		usage += fmt.Sprintf(" (default %d)", def)
	}
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseUint(s, 10, bits.Len64(uint64(^T(0))))
		if err != nil {
			return fmt.Errorf("want a number from 0 to %d", ^T(0))
		}
		*p = T(v)
		return nil
	})
}

// listVar declares a flag that may be given several times.
func listVar[T any](fs *flag.FlagSet, p *[]T, name, usage string, parse func(string) (T, error)) {
	fs.Func(name, usage+" (repeat for more)", func(s string) error {
		v, err := parse(s)
		if err != nil {
			return err
		}
		*p = append(*p, v)
		return nil
	})
}

func parseUint16(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	return uint16(v), err
}

func parseUint32(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}

// sizeVar declares a size flag ("64MiB"); it stays nil when not given.
func sizeVar(fs *flag.FlagSet, p **api.ByteSize, name, usage string) {
	fs.Func(name, usage+" (a byte count, or with KiB, MiB, GiB, TiB, KB, MB, GB, TB)", func(s string) error {
		v, err := config.ParseSize(s)
		if err != nil {
			return err
		}
		b := api.ByteSize(v)
		*p = &b
		return nil
	})
}

// ctlEdit is the command of an add, set or remove: it prints nothing.
func ctlEdit(method string, params any) (*Command, error) {
	return &Command{Method: method, Params: params}, nil
}

// showSave writes save_config's YAML to stdout ("-") or, atomically, to a file.
func showSave(to string) func(json.RawMessage, io.Writer) error {
	return func(raw json.RawMessage, out io.Writer) error {
		var r api.SaveResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.Redacted > 0 && to != "-" {
			// The file would not start the daemon: -check refuses a
			// redacted secret. Standard output is for a person to fix.
			return fmt.Errorf("save: not writing %s: %s; or save to standard output (-) and put them back", to, r.Note)
		}
		if r.Note != "" {
			// On stderr, so that "save -" still writes YAML alone.
			fmt.Fprintln(os.Stderr, "note:", r.Note)
		}
		if to == "-" {
			_, err := io.WriteString(out, r.YAML)
			return err
		}
		if err := config.WriteFileAtomic(to, []byte(r.YAML)); err != nil {
			return fmt.Errorf("save: %w", err)
		}
		_, err := fmt.Fprintf(out, "saved the running configuration to %s\n", to)
		return err
	}
}

func showReload(raw json.RawMessage, out io.Writer) error {
	var r api.ReloadResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "reloaded %s: generation %d\n", r.File, r.Generation)
	return err
}
