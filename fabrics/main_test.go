package fabrics

import (
	"io"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestMain(m *testing.M) {
	if os.Getenv("FABRICS_TEST_LOG") == "" {
		logrus.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
