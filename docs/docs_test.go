package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// markdownFiles are the documents whose links are checked: the README and
// every file in this directory.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d documents in docs/: %q", len(files), files)
	}
	return append([]string{"../README.md"}, files...)
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	// link is an inline Markdown link; its target ends at the first blank
	// or closing parenthesis.
	link    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// slugDrop is what GitHub leaves out of a heading's anchor: punctuation
	// other than '-' and '_'.
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// prose is a Markdown document with fenced and indented code blocks blanked
// and inline code spans emptied (a span may run over lines), where a
// "[x](y)" or a "#" is not Markdown. Line breaks stay where they were, so
// offsets still give line numbers. A heading keeps its code spans' text,
// which is part of its anchor.
func prose(doc string) string {
	lines := strings.Split(doc, "\n")
	fenced := false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			fenced = !fenced
			lines[i] = ""
		case fenced, strings.HasPrefix(line, "    "), strings.HasPrefix(line, "\t"):
			lines[i] = ""
		case strings.HasPrefix(line, "#"):
			lines[i] = strings.ReplaceAll(line, "`", "")
		}
	}
	return codeSpan.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(span string) string {
		return strings.Repeat("\n", strings.Count(span, "\n")) + "``"
	})
}

// anchors are the #fragments GitHub gives a document's headings: lowercase,
// punctuation dropped but '-' and '_', each space a '-', and "-1", "-2"
// after a repeated one.
func anchors(doc string) map[string]bool {
	found := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose(doc), "\n") {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugDrop.ReplaceAllString(strings.ToLower(m[1]), "")
		slug = strings.ReplaceAll(slug, " ", "-")
		if n := seen[slug]; n > 0 {
			found[slug+"-"+strconv.Itoa(n)] = true
		} else {
			found[slug] = true
		}
		seen[slug]++
	}
	return found
}

// TestLinks keeps every relative link of the README and docs/ true: the
// file it names exists, and its #anchor is a heading of that file (or of
// the same document, for a bare #anchor). Web links are not followed.
func TestLinks(t *testing.T) {
	checked := 0
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := prose(string(data))
		for _, at := range link.FindAllStringSubmatchIndex(text, -1) {
			whole, target := text[at[0]:at[1]], text[at[2]:at[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			line := strings.Count(text[:at[0]], "\n") + 1
			where := file + ":" + strconv.Itoa(line) + ": " + whole
			path, fragment, _ := strings.Cut(target, "#")
			doc := string(data)
			if path != "" {
				full := filepath.Join(filepath.Dir(file), path)
				fi, err := os.Stat(full)
				if err != nil {
					t.Errorf("%s: %s does not exist", where, full)
					continue
				}
				if fi.IsDir() {
					if fragment != "" {
						t.Errorf("%s: %s is a directory, which has no anchors", where, full)
					}
					continue
				}
				b, err := os.ReadFile(full)
				if err != nil {
					t.Fatal(err)
				}
				doc = string(b)
			}
			if fragment != "" && !anchors(doc)[fragment] {
				t.Errorf("%s: no heading has the anchor #%s", where, fragment)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d links: is the link pattern still right?", checked)
	}
}

// readmeSection returns the indented lines of the README's section
// "## title", trimmed: its commands.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## "+title+"\n")
	if !ok {
		t.Fatalf(`README.md has no "## %s" section`, title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var commands []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "    ") {
			commands = append(commands, strings.TrimSpace(line))
		}
	}
	return commands
}

// TestSoakCommands keeps the README's soaks and benchmarks runnable: each
// script it names is an executable file, and each scenario it selects
// with E2E_ONLY exists.
func TestSoakCommands(t *testing.T) {
	commands := readmeSection(t, "Soaks and benchmarks")
	if len(commands) < 4 {
		t.Fatalf("README's soaks and benchmarks: %q, want the bench, the soaks and the RBD benchmark", commands)
	}
	only := regexp.MustCompile(`E2E_ONLY='\^([0-9a-z-]+)\$'`)
	env := regexp.MustCompile(`^([A-Z0-9_]+=\S+ +)+`)
	for _, c := range commands {
		if script, _, _ := strings.Cut(env.ReplaceAllString(c, ""), " "); strings.HasPrefix(script, "./") {
			fi, err := os.Stat(filepath.Join("..", script))
			if err != nil || fi.Mode().Perm()&0o111 == 0 {
				t.Errorf("README's command %s: not an executable file (%v)", script, err)
			}
			continue
		}
		m := only.FindStringSubmatch(c)
		if m == nil {
			t.Errorf("README's command %q names neither a script nor one scenario", c)
			continue
		}
		if _, err := os.Stat(filepath.Join("../test/e2e/scenarios", m[1]+".sh")); err != nil {
			t.Errorf("README's command %q: %v", c, err)
		}
	}
}

// TestSetUpCommands keeps the README's "Set up" section naming the two
// commands that set everything up: the demo and the test command, as they
// are in the repository, executable, and the test command the one CI runs.
func TestSetUpCommands(t *testing.T) {
	commands := readmeSection(t, "Set up")
	want := []string{"./test/demo.sh", "./test/run-tests.sh"}
	if strings.Join(commands, "\n") != strings.Join(want, "\n") {
		t.Fatalf("README's Set up commands are %q, want %q", commands, want)
	}
	for _, c := range commands {
		fi, err := os.Stat(filepath.Join("..", c))
		if err != nil {
			t.Errorf("README's set-up command %s: %v", c, err)
			continue
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("README's set-up command %s is not an executable file (mode %v)", c, fi.Mode())
		}
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), want[1]) {
		t.Errorf(".ci/run does not run %s, the README's test command", want[1])
	}
}
