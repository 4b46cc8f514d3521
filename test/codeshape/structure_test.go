package codeshape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// importRules are the directions the module's packages import in: the
// protocol and its building blocks know nothing of the transports or the
// daemon, the transports nothing of the daemon, and the management API
// drives the daemon from outside. Packages are named relative to the module;
// a name covers the packages below it too. Imports from test files do not
// count.
var importRules = []struct {
	from, not []string
	why       string
}{
	{[]string{"fabrics", "nvme", "dhchap", "tlspsk", "ktls", "gateway", "backend", "config"},
		[]string{"daemon", "api", "ctl", "metrics", "sharedstate", "rdma", "tcp", "cmd"},
		"the protocol and its parts know nothing of transports, the daemon or its tools"},
	{[]string{"rdma", "tcp"}, []string{"daemon", "api", "ctl", "metrics", "sharedstate"},
		"a transport knows nothing of the daemon or its tools"},
	{[]string{"api"}, []string{"daemon", "ctl", "metrics", "sharedstate", "rdma", "tcp"},
		"the API drives the daemon through its Daemon interface"},
	{[]string{"ctl"}, []string{"daemon", "metrics", "sharedstate", "rdma", "tcp"},
		"ctl is a client of the API"},
	{[]string{"daemon"}, []string{"api", "ctl"}, "the API is the daemon's caller"},
	{[]string{"metrics", "sharedstate"}, []string{"daemon", "api", "ctl"},
		"the daemon uses them, not the other way"},
}

// listedPackage is what go list says of one package of the module.
type listedPackage struct {
	ImportPath, Name, Dir string
	Imports               []string // of its non-test files
	Module                struct{ Path string }
}

// rel is p's path relative to the module: "" for the module's root.
func (p listedPackage) rel() string {
	return strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, p.Module.Path), "/")
}

// under reports whether the module-relative path rel is name or below it.
func under(rel, name string) bool { return rel == name || strings.HasPrefix(rel, name+"/") }

// TestPackageStructure keeps the package structure: every library package
// says what it owns in a doc.go, and the imports run one way.
func TestPackageStructure(t *testing.T) {
	pkgs := listModule(t, moduleRoot(t))
	for _, d := range missingDocs(pkgs) {
		t.Error(d)
	}
	for _, msg := range wrongImports(pkgs) {
		t.Error(msg)
	}
}

// listModule lists every package of the module at root with one go list.
// Without the go command there is nothing to check against, and that is a
// failure, not a skip.
func listModule(t *testing.T, root string) []listedPackage {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the package structure is read with go list: %v", err)
	}
	cmd := exec.Command(goCmd, "list", "-json=ImportPath,Name,Dir,Imports,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list ./...: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... listed no packages")
	}
	return pkgs
}

// missingDoc is a package without a doc.go that says what it owns.
type missingDoc struct {
	pkg, why string // pkg relative to the module
}

func (d missingDoc) String() string { return d.pkg + ": " + d.why }

// missingDocs names each package that is neither a command nor under test/
// and has no doc.go with a package comment.
func missingDocs(pkgs []listedPackage) []missingDoc {
	var missing []missingDoc
	for _, p := range pkgs {
		if p.Name == "main" || under(p.rel(), "test") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
		switch {
		case errors.Is(err, os.ErrNotExist):
			why := "no doc.go; say there what the package owns"
			if other := packageCommentFile(p.Dir); other != "" {
				why = "no doc.go; move the package comment there from " + other
			}
			missing = append(missing, missingDoc{p.rel(), why})
		case err != nil:
			missing = append(missing, missingDoc{p.rel(), err.Error()})
		case f.Doc == nil:
			missing = append(missing, missingDoc{p.rel(), "doc.go has no package comment"})
		}
	}
	return missing
}

// packageCommentFile is the name of the first non-test file in dir with a
// package comment, or "".
func packageCommentFile(dir string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err == nil && f.Doc != nil {
			return filepath.Base(name)
		}
	}
	return ""
}

// wrongImports names each import, from a non-test file, that goes against
// importRules, that reaches the daemon from anywhere but the command, or
// that reaches the test tools from outside test/.
func wrongImports(pkgs []listedPackage) []string {
	var msgs []string
	for _, p := range pkgs {
		from := p.rel()
		for _, path := range p.Imports {
			if !under(path, p.Module.Path) || path == p.Module.Path {
				continue // outside the module
			}
			imp := strings.TrimPrefix(path, p.Module.Path+"/")
			for _, r := range importRules {
				if slices.ContainsFunc(r.from, func(n string) bool { return under(from, n) }) &&
					slices.ContainsFunc(r.not, func(n string) bool { return under(imp, n) }) {
					msgs = append(msgs, fmt.Sprintf("%s imports %s: %s", from, imp, r.why))
				}
			}
			if under(imp, "daemon") && from != "cmd/nvmeof-tgt" && !under(from, "daemon") {
				msgs = append(msgs, fmt.Sprintf("%s imports %s: only cmd/nvmeof-tgt runs the daemon", from, imp))
			}
			if under(imp, "test") && !under(from, "test") {
				msgs = append(msgs, fmt.Sprintf("%s imports %s: the test tools are for tests only", from, imp))
			}
		}
	}
	return msgs
}

// TestStructureRulesCanFail gives each rule one package that breaks it,
// so that a rule cannot pass by never matching.
func TestStructureRulesCanFail(t *testing.T) {
	const mod = "example.org/tgt"
	pkg := func(rel string, imports ...string) listedPackage {
		p := listedPackage{ImportPath: mod + "/" + rel, Name: filepath.Base(rel)}
		p.Module.Path = mod
		for _, imp := range imports {
			p.Imports = append(p.Imports, mod+"/"+imp)
		}
		return p
	}
	for _, tc := range []struct {
		pkg  listedPackage
		want []string
	}{
		{pkg("fabrics", "nvme", "tcp"), []string{"fabrics imports tcp: the protocol"}},
		{pkg("backend/uring", "cmd/nvmeof-tgt"), []string{"backend/uring imports cmd/nvmeof-tgt: the protocol"}},
		{pkg("config", "metrics/metricstest"), []string{"config imports metrics/metricstest: the protocol"}},
		{pkg("rdma", "fabrics", "sharedstate"), []string{"rdma imports sharedstate: a transport"}},
		{pkg("tcp", "api"), []string{"tcp imports api: a transport"}},
		{pkg("api", "config", "rdma"), []string{"api imports rdma: the API drives"}},
		{pkg("ctl", "api", "metrics"), []string{"ctl imports metrics: ctl is a client"}},
		{pkg("daemon", "fabrics", "api"), []string{"daemon imports api: the API is the daemon's caller"}},
		{pkg("sharedstate", "ctl"), []string{"sharedstate imports ctl: the daemon uses them"}},
		{pkg("metrics", "daemon"), []string{"metrics imports daemon: the daemon uses them", "metrics imports daemon: only cmd/nvmeof-tgt"}},
		{pkg("gateway", "daemon"), []string{"gateway imports daemon: the protocol", "gateway imports daemon: only cmd/nvmeof-tgt"}},
		{pkg("cmd/other", "daemon"), []string{"cmd/other imports daemon: only cmd/nvmeof-tgt"}},
		{pkg("nvme", "test/targettest"), []string{"nvme imports test/targettest: the test tools"}},
		{pkg("cmd/nvmeof-tgt", "daemon", "api", "ctl", "metrics"), nil},
		{pkg("test/e2e", "daemon", "test/targettest"), []string{"test/e2e imports daemon: only cmd/nvmeof-tgt"}},
	} {
		got := wrongImports([]listedPackage{tc.pkg})
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], tc.want[i])
		}
		if !ok {
			t.Errorf("%s importing %q: got %q, want messages starting %q", tc.pkg.rel(), tc.pkg.Imports, got, tc.want)
		}
	}
}

// TestMissingDocsNamesEachPackage gives missingDocs packages without a
// doc.go (one with its package comment in another file), with a doc.go
// that has no package comment, with a right one, and a command and a
// test tool without either.
func TestMissingDocsNamesEachPackage(t *testing.T) {
	root := t.TempDir()
	pkg := func(rel, name, doc string) listedPackage {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if doc != "" {
			if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := listedPackage{ImportPath: "example.org/tgt/" + rel, Name: name, Dir: dir}
		p.Module.Path = "example.org/tgt"
		return p
	}
	other := pkg("other", "other", "")
	if err := os.WriteFile(filepath.Join(other.Dir, "other.go"), []byte("// Package other says it elsewhere.\npackage other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range missingDocs([]listedPackage{
		pkg("nodoc", "nodoc", ""),
		other,
		pkg("bare", "bare", "package bare\n"),
		pkg("detached", "detached", "// Package detached is not next to its clause.\n\npackage detached\n"),
		pkg("good", "good", "// Package good says what it owns.\npackage good\n"),
		pkg("cmd/tool", "main", ""),
		pkg("test/helper", "helper", ""),
	}) {
		got = append(got, d.String())
	}
	want := []string{
		"nodoc: no doc.go; say there what the package owns",
		"other: no doc.go; move the package comment there from other.go",
		"bare: doc.go has no package comment",
		"detached: doc.go has no package comment",
	}
	if !slices.Equal(got, want) {
		t.Errorf("missingDocs = %q, want %q", got, want)
	}
}
