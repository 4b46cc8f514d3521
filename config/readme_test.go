package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// yamlKeys lists the key path of every leaf field of t, by its yaml tag:
// a struct's fields are joined with dots, a list of structs adds "[]".
func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		path := prefix + name
		switch ft := f.Type; {
		case ft.Kind() == reflect.Struct:
			keys = append(keys, yamlKeys(ft, path+".")...)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, yamlKeys(ft.Elem(), path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, yamlKeys(ft.Elem(), path+"[].")...)
		default:
			keys = append(keys, path)
		}
	}
	return keys
}

// readmeKey is the first cell of a row of the key table.
var readmeKey = regexp.MustCompile("^\\| `([a-z_.\\[\\]]+)` \\|")

// TestReadmeListsEveryKey keeps the key table of docs/configuration.md
// true: a key added to the configuration must be documented there, and a
// row for a key that no longer exists must go.
func TestReadmeListsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Every key\n")
	if !ok {
		t.Fatal("docs/configuration.md has no \"## Every key\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if m := readmeKey.FindStringSubmatch(line); m != nil {
			rows[m[1]] = true
		}
	}
	keys := yamlKeys(reflect.TypeOf(Config{}), "")
	if len(keys) < 25 {
		t.Fatalf("found only %d configuration keys: %q", len(keys), keys)
	}
	for _, k := range keys {
		if !rows[k] {
			t.Errorf("docs/configuration.md's key table has no row for `%s`", k)
		}
		delete(rows, k)
	}
	for k := range rows {
		t.Errorf("docs/configuration.md's key table documents `%s`, which is not a configuration key", k)
	}
}
