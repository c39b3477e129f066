package example_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevStackSurvivesSIGKILL runs the example bank on `gazconsumer dev` as
// a process of its own, kills that process with SIGKILL while bankctl
// publishes (every broker dies at once, with appends acknowledged but not
// yet persisted), and starts it again on the same directory and ports. The
// members, which lose their etcd lease meanwhile and exit with code 3, are
// restarted as a supervisor would. bankctl check then finds the state and
// events exactly as the load recorded them: nothing acknowledged was lost.
func TestDevStackSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds commands and runs a stack as a process")
	}
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var bin = t.TempDir()
	buildCommands(t, bin, "ledger", "leaderboard", "bankctl")
	var build = exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/gazconsumer")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building gazconsumer: %v\n%s", err, out)
	}
	var gazctl = gazctl(t)

	var dir = t.TempDir()
	var envFile = filepath.Join(dir, "env")
	var etcdPort, brokerPort = freePort(t), freePort(t)
	var devLog bytes.Buffer
	var dev *exec.Cmd
	var startDev = func() {
		t.Helper()
		_ = os.Remove(envFile)
		dev = exec.Command(filepath.Join(bin, "gazconsumer"), "dev", "--dir", filepath.Join(dir, "stack"),
			"--etcd-port", etcdPort, "--broker-port", brokerPort, "--journals", "specs/journals.yaml", "--env-file", envFile)
		dev.Stdout, dev.Stderr = &devLog, &devLog
		if err := dev.Start(); err != nil {
			t.Fatal(err)
		}
		for {
			if b, err := os.ReadFile(envFile); err == nil && len(b) != 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("gazconsumer dev did not start:\n%s", devLog.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	startDev()
	// After the members stop (cleanups run last first).
	t.Cleanup(func() {
		_ = dev.Process.Signal(syscall.SIGTERM)
		_ = dev.Wait()
		if t.Failed() {
			t.Logf("gazconsumer dev logged:\n%s", devLog.String())
		}
	})

	var env = append(os.Environ(), "BROKER_ADDRESS=http://127.0.0.1:"+brokerPort, "ETCD_ADDRESS=http://127.0.0.1:"+etcdPort)
	var ledger, leaderboard = startBank(ctx, t, bin, gazctl, "http://127.0.0.1:"+etcdPort, "http://127.0.0.1:"+brokerPort)
	var members = []*member{ledger, leaderboard}

	var record = filepath.Join(dir, "record.json")
	var pubOut bytes.Buffer
	var published = make(chan error, 1)
	go func() {
		var cmd = exec.CommandContext(ctx, filepath.Join(bin, "bankctl"), "publish", "--orders", "6000", "--payments", "6000",
			"--customers", "200", "--txn", "100", "--rate", "1500", "--seed", "11", "--record", record)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &pubOut, &pubOut
		published <- cmd.Run()
	}()

	// Mid-load, the stack's process dies, and starts again.
	time.Sleep(3 * time.Second)
	if err := dev.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	t.Log("killed gazconsumer dev; starting it again")
	startDev()
	if !strings.Contains(devLog.String(), "appended them again") {
		t.Logf("the restarted stack replayed nothing (everything was persisted):\n%s", devLog.String())
	}

	// Members that lost their lease meanwhile exit with code 3: restart them.
	var pubErr error
	var deadline = time.After(3 * time.Minute)
wait:
	for {
		select {
		case pubErr = <-published:
			break wait
		case <-deadline:
			t.Fatalf("bankctl publish did not finish:\n%s", pubOut.String())
		case <-time.After(500 * time.Millisecond):
			for _, m := range members {
				if code, ok := m.exitCode(); ok {
					if code != 3 {
						t.Fatalf("%s exited with %d, not 3 (lost lease):\n%s", m.app, code, m.log)
					}
					t.Logf("%s lost its lease while the stack was down (exit 3): restarting it", m.app)
					m.start()
				}
			}
		}
	}
	if pubErr != nil {
		t.Fatalf("bankctl publish: %v\n%s", pubErr, pubOut.String())
	}
	for _, m := range members {
		if code, ok := m.exitCode(); ok {
			if code != 3 {
				t.Fatalf("%s exited with %d, not 3 (lost lease):\n%s", m.app, code, m.log)
			}
			m.start()
		}
		m.waitServing(ctx)
	}

	var bankctl = func(args ...string) (string, error) {
		var cmd = exec.CommandContext(ctx, filepath.Join(bin, "bankctl"), append(args,
			"--ledger.address", ledger.address(), "--leaderboard.address", leaderboard.address())...)
		cmd.Env = env
		var out, err = cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := bankctl("follow", "--timeout", "3m"); err != nil {
		t.Fatalf("bankctl follow: %v\n%s", err, out)
	}
	// The ledger releases holds and accounts fall idle after the load: check
	// again until they have.
	out, err := bankctl("check", "--record", record, "--wait", settled.String())
	if err != nil || !strings.Contains(out, "OK:") {
		t.Fatalf("bankctl check: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "OK:") {
			t.Logf("bankctl check: %s", line)
		}
	}
}
