package backend

import "testing"

func TestAsyncSinkIDs(t *testing.T) {
	var got []uint32
	a, err := NewAsyncSink(func(tag uint32, res int64) { got = append(got, tag) })
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewAsyncSink(func(uint32, int64) { t.Fatal("completion delivered to the wrong sink") })
	if err != nil {
		t.Fatal(err)
	}
	completeAsync(asyncArg(a, 5), 0)
	if len(got) != 1 || got[0] != 5 {
		t.Fatalf("sink a got %v, want [5]", got)
	}
	b.Close()
	// A closed sink's completions go nowhere; its ID is reused.
	completeAsync(asyncArg(b, 1), 0)
	c, err := NewAsyncSink(func(uint32, int64) {})
	if err != nil {
		t.Fatal(err)
	}
	if c.id != b.id {
		t.Errorf("new sink has ID %d, want the closed one's %d", c.id, b.id)
	}
	a.Close()
	c.Close()
}
