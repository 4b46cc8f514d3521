package config

// UnmarshalYAML decodes a port and records whether inline_data_size was
// written: 0 there means no in-capsule data, while a port without the key
// gets DefaultInlineDataSize. It takes the decode function rather than the
// node so that the strict decoder's unknown-key check still applies.
func (p *Port) UnmarshalYAML(decode func(any) error) error {
	type plain Port // without the method, or decoding would recurse
	if err := decode((*plain)(p)); err != nil {
		return err
	}
	var keys map[string]any
	if err := decode(&keys); err != nil {
		return err
	}
	if _, ok := keys["inline_data_size"]; ok && p.InlineDataSize == 0 {
		p.noInline = true
	}
	return nil
}
