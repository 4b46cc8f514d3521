package config

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkKeys refuses a mapping key that is not one of keys. Decoding inside
// an unmarshaler does not inherit KnownFields, so without this a misspelt
// key would be dropped without a word, not an error as everywhere else.
func checkKeys(n *yaml.Node, what string, keys []string) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(keys, k.Value) {
			return fmt.Errorf("line %d: unknown %s key %q (want %s)", k.Line, what, k.Value, strings.Join(keys, ", "))
		}
	}
	return nil
}

// decodeShortForm decodes an entry that is either a scalar, short for its
// main field, or the whole object: a scalar zeroes *fields and decodes
// into short (which points into *fields); an object, of the given keys
// only, replaces *fields. fields is the type's twin without methods, so
// that decoding it does not call UnmarshalYAML again.
func decodeShortForm[F any](n *yaml.Node, fields *F, short any, what string, keys []string) error {
	if n.Kind == yaml.ScalarNode {
		*fields = *new(F)
		return n.Decode(short)
	}
	if err := checkKeys(n, what, keys); err != nil {
		return err
	}
	var f F
	if err := n.Decode(&f); err != nil {
		return err
	}
	*fields = f
	return nil
}

// decodeScalar decodes a scalar with parse into *v, naming the node's line
// in an error; notScalar is the error for any other node.
func decodeScalar[T any](n *yaml.Node, v *T, parse func(string) (T, error), notScalar string) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s", n.Line, notScalar)
	}
	p, err := parse(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*v = p
	return nil
}
