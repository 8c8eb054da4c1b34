package operatortest

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// A package's envtests share one manager and one scripted engine, so
// they run one after another: minutes in all, with the CPU mostly idle.
// When go test runs the whole package, runShards starts this test binary
// again as DEVLOOP_TEST_SHARDS processes (default 2), each with its own
// envtest, manager and a share of the tests, and waits for them.
// DEVLOOP_TEST_SHARDS=1 turns it off; so does any -run, -skip, -list,
// -bench or coverage profile, which then apply to one process as usual.

const (
	shardsEnv = "DEVLOOP_TEST_SHARDS"
	shardEnv  = "DEVLOOP_TEST_SHARD" // set in a shard: run as told
)

// runShards runs the shards and returns their exit code, or ok=false when
// this process is to run the tests itself.
func runShards() (code int, ok bool) {
	if os.Getenv(shardEnv) != "" {
		return 0, false
	}
	n := 2
	if v := os.Getenv(shardsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a number of processes\n", shardsEnv, v)
			return 2, true
		}
	}
	flag.Parse()
	for _, f := range []string{"test.run", "test.skip", "test.list", "test.bench", "test.coverprofile"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			return 0, false
		}
	}
	names, err := TestNames(".")
	if err != nil || n == 1 || len(names) < n {
		return 0, false
	}
	var out sync.Mutex
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i, group := range Split(names, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = runShard(i, group, &out)
		}()
	}
	wg.Wait()
	for _, c := range codes {
		if c != 0 {
			return c, true
		}
	}
	return 0, true
}

// TestNames are the Test functions of the package's test files in dir.
func TestNames(dir string) ([]string, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(\w+ \*testing\.T\)`)
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return nil, err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names, nil
}

// Split deals the names out to n groups in turn.
func Split(names []string, n int) [][]string {
	groups := make([][]string, n)
	for i, name := range names {
		groups[i%n] = append(groups[i%n], name)
	}
	return groups
}

// runShard runs this binary with the group's tests, its output copied
// line by line under out, and returns its exit code.
func runShard(i int, group []string, out *sync.Mutex) int {
	args := append(append([]string{}, os.Args[1:]...), "-test.run=^("+strings.Join(group, "|")+")$")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), shardEnv+"="+strconv.Itoa(i))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shard", i, err)
		return 1
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "shard", i, err)
		return 1
	}
	copyLines(stdout, os.Stdout, out)
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "shard", i, err)
		return 1
	}
	return 0
}

func copyLines(r io.Reader, w io.Writer, mu *sync.Mutex) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		mu.Lock()
		fmt.Fprintln(w, sc.Text())
		mu.Unlock()
	}
}

// TestShardsRunEveryTestOnce: the shards' groups hold every Test function
// of the package once, this one among them.
