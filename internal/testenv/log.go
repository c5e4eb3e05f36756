package testenv

import (
	"os"

	"go.uber.org/zap/zapcore"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogEnv names the environment variable that turns on the manager's logs in
// tests: SIDECARSET_TEST_LOG=1 (info) or 2 (debug). Errors are always shown.
const LogEnv = "SIDECARSET_TEST_LOG"

// SetLogger sends controller-runtime's logs to stderr: errors only, unless
// SIDECARSET_TEST_LOG asks for more.
func SetLogger() {
	level := zapcore.ErrorLevel
	switch os.Getenv(LogEnv) {
	case "1":
		level = zapcore.InfoLevel
	case "2":
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level), zap.StacktraceLevel(zapcore.PanicLevel)))
}
